import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { paced } from './paced.ts';

interface Seen {
  method: string | undefined;
  url: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A server that answers after `delayMs`, 503 on /fail, and keeps what it got. */
async function server(
  delayMs: number,
): Promise<{ url: string; server: Server; got: () => number; last: () => Seen | undefined }> {
  let got = 0;
  let last: Seen | undefined;
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      got++;
      last = { method: req.method, url: req.url, headers: req.headers, body };
      setTimeout(() => {
        const out = JSON.stringify({ echo: body, method: req.method });
        res.writeHead(req.url === '/fail' ? 503 : 201, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(out),
        });
        res.end(out);
      }, delayMs);
    });
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    server: s,
    got: () => got,
    last: () => last,
  };
}

let open: Server | undefined;
afterEach(async () => {
  const s = open;
  open = undefined;
  if (s) await new Promise((resolve) => s.close(resolve));
});

describe('paced (open-loop load at a steady rate)', () => {
  it('sends rate × duration requests spread over the run and times each from when it fell due', async () => {
    const s = await server(20);
    open = s.server;
    const started = performance.now();
    const r = await paced({
      url: `${s.url}/x`,
      rate: 200,
      durationSeconds: 1,
      connections: 8,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"ttl_seconds":60}',
    });
    const elapsed = performance.now() - started;
    expect(s.got()).toBe(200);
    expect(r).toMatchObject({ non2xx: 0, errors: 0 });
    // The request as given: method, path, headers and body.
    expect(s.last()).toMatchObject({
      method: 'POST',
      url: '/x',
      headers: { 'content-type': 'application/json', 'content-length': '18' },
      body: '{"ttl_seconds":60}',
    });
    // Spread over the second, not sent at once: the run lasts about as long as asked.
    expect(elapsed).toBeGreaterThan(950);
    expect(r.rps).toBeGreaterThan(150);
    expect(r.rps).toBeLessThanOrEqual(205);
    // Every answer took the server's 20 ms at least.
    expect(r.p50).toBeGreaterThanOrEqual(20);
    expect(r.max).toBeGreaterThanOrEqual(r.p99);
  });

  it('counts the wait for a free connection: latency runs from when a request fell due', async () => {
    // One connection and 50 ms answers can carry 20 requests a second; 100 are due in one.
    const s = await server(50);
    open = s.server;
    const r = await paced({ url: s.url, rate: 100, durationSeconds: 1, connections: 1 });
    expect(s.got()).toBe(100);
    // The last request fell due at ~1 s and was answered at ~5 s.
    expect(r.max).toBeGreaterThan(3_500);
    expect(r.p50).toBeGreaterThan(1_000);
  });

  it('counts answers without Content-Length as errors instead of misreading them', async () => {
    const s = createServer((_req, res) => {
      res.writeHead(200, { 'transfer-encoding': 'chunked' });
      res.end('chunked');
    });
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    open = s;
    const r = await paced({
      url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
      rate: 20,
      durationSeconds: 0.5,
      connections: 2,
    });
    expect(r.errors).toBe(10);
    expect(r.non2xx).toBe(0);
  });

  it('counts answers outside 2xx', async () => {
    const s = await server(0);
    open = s.server;
    const r = await paced({ url: `${s.url}/fail`, rate: 50, durationSeconds: 0.5, connections: 2 });
    expect(r.non2xx).toBe(25);
    expect(r.errors).toBe(0);
  });
});
