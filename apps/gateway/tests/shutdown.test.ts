import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';

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
});
