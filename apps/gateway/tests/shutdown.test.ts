import { Agent, request } from 'node:http';
import { ConfigError } from '@relayplane/shared/config-error';
import { testLogger } from '@relayplane/testing/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGatewayConfig } from '../src/config.ts';
import { GatewayService } from '../src/service.ts';
import { type Stack, startStack } from './support/stack.ts';

/** GET over a fresh keep-alive connection: the status, the Connection header and the body. */
function get(url: string): Promise<{ status: number; connection: string | undefined; body: unknown }> {
  const agent = new Agent({ keepAlive: true });
  return new Promise<{ status: number; connection: string | undefined; body: unknown }>((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: JSON.parse(text) }),
      );
    });
    req.once('error', reject);
    req.end();
  }).finally(() => agent.destroy());
}

describe('gateway shutdown', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack('gw_shutdown');
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('answers a held revocation long-poll at once with nothing new and closes without waiting for keep-alive sockets', async () => {
    const owner = await stack.ownerAuth();
    const relay = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: owner,
      payload: { region: 'eu', host: 'shutdown.example', port: 443 },
    });
    const address = await stack.app.listen({ port: 0, host: '127.0.0.1' });
    const poll = fetch(`${address}/v1/credentials/revocations?cursor=0&wait=25`, {
      headers: { authorization: `Bearer ${relay.json().token}` },
    });
    // The poll is held by the issuer until something is revoked or 25 s pass.
    const held = await Promise.race([
      poll.then(() => false),
      new Promise((r) => setTimeout(() => r(true), 300)),
    ]);
    expect(held).toBe(true);
    const started = Date.now();
    await stack.app.close();
    const closeMs = Date.now() - started;
    const res = await poll;
    expect(res.status).toBe(200);
    expect(res.headers.get('connection')).toBe('close');
    expect(await res.json()).toEqual({ revocations: [], next_cursor: 0, watermarks: [], revoked_keys: [] });
    expect(closeMs).toBeLessThan(2_000);
  });

  it('with GATEWAY_SHUTDOWN_DELAY_MS, goes on serving after SIGTERM: /readyz 503, every answer closes its connection, long-polls held; then they answer and it stops accepting', async () => {
    const env = {
      PORT: '0',
      GATEWAY_ADMIN_ADDRESS: `127.0.0.1:${stack.admin.port}`,
      GATEWAY_ISSUER_ADDRESS: `127.0.0.1:${stack.issuer.port}`,
      GATEWAY_BILLING_ADDRESS: `127.0.0.1:${stack.billing.port}`,
      GATEWAY_SHUTDOWN_DELAY_MS: '1500',
    };
    const gateway = await GatewayService.create(readGatewayConfig(env), { logger: testLogger('gateway') });
    await gateway.start();
    const url = gateway.url;
    const ready = await get(`${url}/readyz`);
    expect(ready.status).toBe(200);
    expect(ready.connection).toBe('keep-alive');
    const relay = await fetch(`${url}/admin/v1/relays`, {
      method: 'POST',
      headers: { ...(await stack.ownerAuth()), 'content-type': 'application/json' },
      body: JSON.stringify({ region: 'eu', host: 'delay.example', port: 443 }),
    });
    expect(relay.status).toBe(201);
    const { token } = (await relay.json()) as { token: string };
    const poll = fetch(`${url}/v1/credentials/revocations?cursor=0&wait=25`, {
      headers: { authorization: `Bearer ${token}` },
    });
    let pollAnsweredAt = 0;
    void poll.then(() => {
      pollAnsweredAt = Date.now();
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(pollAnsweredAt, 'the poll is held').toBe(0);

    // What runMain does on SIGTERM.
    const started = Date.now();
    const destroyed = gateway.destroy();
    const notReady = await get(`${url}/readyz`);
    expect(notReady).toEqual({
      status: 503,
      connection: 'close',
      body: { error: 'not ready: the gateway is shutting down' },
    });
    // Everything else is still answered, each answer closing its connection.
    const jwks = await get(`${url}/v1/credentials/jwks`);
    expect(jwks.status).toBe(200);
    expect(jwks.connection).toBe('close');
    expect((jwks.body as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(1_500);

    // The held poll is not cut while the gateway serves on (relays would re-poll it in a loop):
    // it answers, with nothing new, when the server closes.
    expect(pollAnsweredAt, 'the poll is still held').toBe(0);
    await destroyed;
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    const polled = await poll;
    expect(polled.status).toBe(200);
    expect(await polled.json()).toMatchObject({ revocations: [] });
    expect(pollAnsweredAt - started).toBeGreaterThanOrEqual(1_500);
    await expect(get(`${url}/healthz`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('refuses a delay and drain that together outlast the process shutdown timeout, naming both variables', () => {
    const read = () =>
      readGatewayConfig({ GATEWAY_SHUTDOWN_DELAY_MS: '15000', GATEWAY_SHUTDOWN_DRAIN_MS: '10000' });
    expect(read).toThrow(ConfigError);
    expect(read).toThrow(
      'GATEWAY_SHUTDOWN_DELAY_MS (15000) plus GATEWAY_SHUTDOWN_DRAIN_MS (10000) must not exceed 24000 ms',
    );
    expect(readGatewayConfig({ GATEWAY_SHUTDOWN_DELAY_MS: '5000' })).toMatchObject({
      shutdownDelayMs: 5_000,
      shutdownDrainMs: 5_000,
    });
    expect(readGatewayConfig({})).toMatchObject({ shutdownDelayMs: 0 });
  });
});
