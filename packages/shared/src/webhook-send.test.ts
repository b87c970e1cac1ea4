import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendWebhook, WEBHOOK_RESPONSE_BYTES } from './webhook-send.ts';
import { newWebhookSecret, webhookHeaders } from './webhook-signature.ts';

describe('one webhook delivery attempt (a local receiver)', () => {
  const secret = newWebhookSecret();
  const seen: { path: string; host: string | undefined; verified: unknown }[] = [];
  let server: Server;
  let port: number;

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString();
      });
      req.on('end', () => {
        let verified: unknown;
        try {
          verified = new Webhook(secret).verify(body, req.headers as Record<string, string>);
        } catch {
          verified = undefined;
        }
        seen.push({ path: req.url ?? '', host: req.headers.host, verified });
        if (req.url === '/ok') res.writeHead(204).end();
        else if (req.url === '/fail') res.writeHead(500).end('x'.repeat(10_000));
        else if (req.url === '/redirect') res.writeHead(302, { location: '/ok' }).end();
        else if (req.url === '/slow') setTimeout(() => res.writeHead(200).end(), 2_000);
        else res.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const attempt = (path: string, timeoutMs?: number) => {
    const body = JSON.stringify({ id: 'evt_1', type: 'session.started', data: { path } });
    const headers = webhookHeaders([secret], `msg_${path.slice(1)}`, Math.floor(Date.now() / 1000), body);
    // The name is pinned to the checked address: hooks.example.test is never resolved.
    return sendWebhook(new URL(`http://hooks.example.test:${port}${path}`), '127.0.0.1', headers, body, {
      ...(timeoutMs ? { timeoutMs } : {}),
    });
  };

  it('delivers a signed body to the checked address, the URL its host', async () => {
    const res = await attempt('/ok');
    expect(res).toMatchObject({ delivered: true, status: 204, body: '' });
    const last = seen.at(-1);
    expect(last).toMatchObject({ path: '/ok', host: `hooks.example.test:${port}` });
    expect(last?.verified).toMatchObject({ type: 'session.started' });
  });

  it('counts a non-2xx as not delivered, keeping the first KiB of its body', async () => {
    const res = await attempt('/fail');
    expect(res).toMatchObject({ delivered: false, status: 500 });
    expect(res.body).toHaveLength(WEBHOOK_RESPONSE_BYTES);
  });

  it('follows no redirect', async () => {
    const before = seen.length;
    expect(await attempt('/redirect')).toMatchObject({ delivered: false, status: 302 });
    expect(seen.slice(before).map((s) => s.path)).toEqual(['/redirect']);
  });

  it('gives up after the timeout', async () => {
    const res = await attempt('/slow', 200);
    expect(res).toMatchObject({ delivered: false, error: 'no answer within 200 ms' });
    expect(res.status).toBeUndefined();
    expect(res.latencyMs).toBeLessThan(1_500);
  });

  it('answers a refused connection as no answer', async () => {
    const closed = await sendWebhook(
      new URL('http://hooks.example.test:1/x'),
      '127.0.0.1',
      webhookHeaders([secret], 'm', 1, '{}'),
      '{}',
    );
    expect(closed).toMatchObject({ delivered: false });
    expect(closed.error).toMatch(/ECONNREFUSED/);
  });
});
