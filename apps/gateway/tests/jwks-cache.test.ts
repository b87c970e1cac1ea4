/**
 * The gateway's JWKS cache and a signing key revocation (docs/credentials.md, "Revoking a
 * signing key"): the announced key leaves the served set before any refresh, and the cache asks
 * the issuer again until its answer has dropped the key too (a replica that had not reloaded yet
 * answers the old set). The issuer here is a stand-in whose answers the test controls; the route
 * tests and tests/e2e/signing-key-revocation.test.ts run the real one.
 */
import { createHash } from 'node:crypto';
import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { MemoryBus } from '@relayplane/shared/bus';
import { testLogger } from '@relayplane/testing/logger';
import { afterEach, describe, expect, it } from 'vitest';
import type { IssuerClient } from '../src/clients.ts';
import { JwksCache, revokedKidOf } from '../src/jwks-cache.ts';

const jwk = (kid: string) => ({ kty: 'OKP', crv: 'Ed25519', x: `x-${kid}`, kid, alg: 'EdDSA', use: 'sig' });
const etagOf = (body: string) => `"${createHash('sha256').update(body).digest('base64url')}"`;
const kidsOf = (body: string | undefined) =>
  (JSON.parse(body ?? '{"keys":[]}') as { keys: { kid: string }[] }).keys.map((k) => k.kid);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An issuer whose GetJwks answers `sets` in turn (the last one from then on), counting calls. */
function issuerAnswering(sets: string[][]) {
  let calls = 0;
  const client = {
    async getJwks() {
      const kids = sets[Math.min(calls, sets.length - 1)] ?? [];
      calls++;
      const body = JSON.stringify({ keys: kids.map(jwk) });
      return { keys: kids.map(jwk), etag: etagOf(body) };
    },
  } as unknown as IssuerClient;
  return { client, calls: () => calls };
}

describe('gateway JWKS cache: revoked keys', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  async function cacheWith(sets: string[][]) {
    const issuer = issuerAnswering(sets);
    const bus = new MemoryBus();
    const cache = new JwksCache(issuer.client, 10_000, testLogger('gateway'));
    await cache.listen(bus);
    closers.push(async () => {
      await cache.close();
      await bus.close();
    });
    await cache.get();
    return { cache, bus, issuer };
  }

  it('drops an announced key at once and asks again until the issuer no longer lists it', async () => {
    // Answers: the first fetch, then three from a replica that has not reloaded, then the new set.
    const { cache, bus, issuer } = await cacheWith([
      ['old', 'next'],
      ['old', 'next'],
      ['old', 'next'],
      ['old', 'next'],
      ['next', 'newer'],
    ]);
    expect(kidsOf(cache.current()?.body)).toEqual(['old', 'next']);
    await bus.publish(BUS_CHANNELS.signingKeysChanged, JSON.stringify({ revoked_kid: 'old' }));
    await sleep(0);
    const dropped = cache.current();
    expect(kidsOf(dropped?.body)).toEqual(['next']);
    // The tag of what is served: the issuer's formula over the served body.
    expect(dropped?.etag).toBe(etagOf(dropped?.body ?? ''));
    // Asked again (every 100 ms) until the issuer's answer dropped it; then it stops asking.
    const started = performance.now();
    while (issuer.calls() < 5 && performance.now() - started < 2_000) await sleep(10);
    expect(issuer.calls()).toBe(5);
    await sleep(50);
    expect(kidsOf(cache.current()?.body)).toEqual(['next', 'newer']);
    expect(cache.current()?.etag).toBe(etagOf(cache.current()?.body ?? ''));
    await sleep(300);
    expect(issuer.calls()).toBe(5);
  });

  it('never serves a revoked key again, even when the issuer lists it later; other changes refresh as before', async () => {
    const { cache, bus, issuer } = await cacheWith([['old', 'next'], ['next'], ['old', 'next', 'third']]);
    cache.revoke('old');
    while (issuer.calls() < 2) await sleep(10);
    await sleep(20);
    expect(kidsOf(cache.current()?.body)).toEqual(['next']);
    // A plain change announcement (the issuer's timestamp payload) refreshes; "old" stays out.
    await bus.publish(BUS_CHANNELS.signingKeysChanged, new Date().toISOString());
    while (issuer.calls() < 3) await sleep(10);
    await sleep(20);
    expect(kidsOf(cache.current()?.body)).toEqual(['next', 'third']);
  });

  it('reads only {"revoked_kid": "<non-empty string>"} as a revocation', () => {
    expect(revokedKidOf('{"revoked_kid":"abc"}')).toBe('abc');
    for (const message of [
      '2026-11-26T00:00:00.000Z',
      '{"revoked_kid":""}',
      '{"revoked_kid":1}',
      '{nope',
      '{}',
    ]) {
      expect(revokedKidOf(message), message).toBeUndefined();
    }
  });
});
