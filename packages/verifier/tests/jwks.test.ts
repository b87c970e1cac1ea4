import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Harness, refusal, startHarness } from './support/harness.ts';
import { credentialClaims, generateSigningKey, mint } from './support/tokens.ts';

/**
 * These tests move the verifier's clock minutes ahead between two feed polls, which makes the
 * feed look stale: the staleness bound (tests/feed-staleness.test.ts) is off here.
 */
const NO_STALENESS_BOUND = { maxFeedStaleness: Number.POSITIVE_INFINITY };

let h: Harness | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await h?.dispose();
  h = undefined;
});

describe('JWKS caching', () => {
  it('serves every verification from one fetch while max-age lasts, importing the key once', async () => {
    const importKey = vi.spyOn(globalThis.crypto.subtle, 'importKey');
    h = await startHarness(NO_STALENESS_BOUND);
    await h.verifier.ready;
    const imports = importKey.mock.calls.length;
    expect(imports).toBe(1);
    for (let i = 0; i < 20; i += 1) {
      await h.verifier.verify(await mint(h.key, credentialClaims(h.clock.now)));
      h.clock.now += 14_000; // 20 × 14 s = 280 s, inside max-age=300
    }
    expect(h.plane.jwksRequests).toHaveLength(1);
    expect(importKey.mock.calls.length).toBe(imports);
  });

  it('revalidates with If-None-Match after max-age, and a 304 keeps the keys and extends freshness', async () => {
    const importKey = vi.spyOn(globalThis.crypto.subtle, 'importKey');
    h = await startHarness(NO_STALENESS_BOUND);
    h.plane.cacheControl = 'public, max-age=60';
    await h.verifier.ready;
    const token = await mint(h.key, credentialClaims(h.clock.now));

    h.clock.now += 60_000;
    await h.verifier.verify(token);
    const [first, second] = h.plane.jwksRequests;
    expect(h.plane.jwksRequests).toHaveLength(2);
    expect(first?.headers['if-none-match']).toBeUndefined();
    expect(second?.headers['if-none-match']).toMatch(/^".+"$/);
    expect(second?.status).toBe(304);

    h.clock.now += 59_999;
    await h.verifier.verify(token);
    expect(h.plane.jwksRequests).toHaveLength(2);
    h.clock.now += 1;
    await h.verifier.verify(token);
    expect(h.plane.jwksRequests).toHaveLength(3);
    expect(importKey.mock.calls.length).toBe(1);
  });

  it('a changed key set (new ETag) is fetched in full and imported again', async () => {
    const importKey = vi.spyOn(globalThis.crypto.subtle, 'importKey');
    h = await startHarness(NO_STALENESS_BOUND);
    await h.verifier.ready;
    const next = await generateSigningKey();
    h.plane.keys = [h.key, next];
    h.clock.now += 300_000;
    await h.verifier.verify(await mint(next, credentialClaims(h.clock.now)));
    expect(h.plane.jwksRequests.map((r) => r.status)).toEqual([200, 200]);
    expect(importKey.mock.calls.length).toBe(3);
  });
});

describe('unknown kid', () => {
  it('refetches at most once per refetchIntervalMs, then refuses as unknown_kid', async () => {
    const harness = await startHarness(NO_STALENESS_BOUND);
    h = harness;
    await h.verifier.ready;
    const stranger = await generateSigningKey();
    const unknown = () => mint(stranger, credentialClaims(harness.clock.now));

    // The start-up fetch counts: the key set is as current as a refetch would make it.
    expect(await refusal(h.verifier.verify(await unknown()))).toBe('unknown_kid');
    expect(h.plane.jwksRequests).toHaveLength(1);

    h.clock.now += 10_000;
    expect(await refusal(h.verifier.verify(await unknown()))).toBe('unknown_kid');
    expect(h.plane.jwksRequests).toHaveLength(2);

    for (let i = 0; i < 5; i += 1)
      expect(await refusal(h.verifier.verify(await unknown()))).toBe('unknown_kid');
    h.clock.now += 9_999;
    expect(await refusal(h.verifier.verify(await unknown()))).toBe('unknown_kid');
    expect(h.plane.jwksRequests).toHaveLength(2);

    h.clock.now += 1;
    expect(await refusal(h.verifier.verify(await unknown()))).toBe('unknown_kid');
    expect(h.plane.jwksRequests).toHaveLength(3);
  });

  it('honours a custom refetchIntervalMs', async () => {
    h = await startHarness({ ...NO_STALENESS_BOUND, refetchIntervalMs: 1_000 });
    await h.verifier.ready;
    const stranger = await generateSigningKey();
    h.clock.now += 1_000;
    expect(await refusal(h.verifier.verify(await mint(stranger, credentialClaims(h.clock.now))))).toBe(
      'unknown_kid',
    );
    expect(h.plane.jwksRequests).toHaveLength(2);
  });

  it('picks up a rotated key: a new kid in the JWKS verifies after one refetch, the old kid still verifies', async () => {
    h = await startHarness(NO_STALENESS_BOUND);
    await h.verifier.ready;
    const rotated = await generateSigningKey();
    h.plane.keys = [rotated, h.key];
    h.clock.now += 10_000;
    const credential = await h.verifier.verify(await mint(rotated, credentialClaims(h.clock.now)));
    expect(credential.mode).toBe('live');
    expect(h.plane.jwksRequests).toHaveLength(2);
    await h.verifier.verify(await mint(h.key, credentialClaims(h.clock.now)));
    await h.verifier.verify(await mint(rotated, credentialClaims(h.clock.now)));
    expect(h.plane.jwksRequests).toHaveLength(2);
  });

  it('a key withdrawn from the JWKS stops verifying once the key set is refreshed', async () => {
    h = await startHarness(NO_STALENESS_BOUND);
    await h.verifier.ready;
    const rotated = await generateSigningKey();
    h.plane.keys = [rotated];
    h.clock.now += 300_000;
    expect(await refusal(h.verifier.verify(await mint(h.key, credentialClaims(h.clock.now))))).toBe(
      'unknown_kid',
    );
  });
});

describe('JWKS failures', () => {
  it('keeps verifying with the last good key set while refreshes fail, retrying once per refetchIntervalMs', async () => {
    const harness = await startHarness(NO_STALENESS_BOUND);
    h = harness;
    await h.verifier.ready;
    h.plane.jwksStatus = 500;
    h.clock.now += 300_000;
    const token = () => mint(harness.key, credentialClaims(harness.clock.now));

    await h.verifier.verify(await token());
    expect(h.plane.jwksRequests.map((r) => r.status)).toEqual([200, 500]);
    expect(h.errors.map((e) => e.message)).toEqual([expect.stringContaining('HTTP 500')]);

    await h.verifier.verify(await token());
    expect(h.plane.jwksRequests).toHaveLength(2);

    h.clock.now += 10_000;
    await h.verifier.verify(await token());
    expect(h.plane.jwksRequests.map((r) => r.status)).toEqual([200, 500, 500]);

    h.plane.jwksStatus = 200;
    h.clock.now += 10_000;
    await h.verifier.verify(await token());
    expect(h.plane.jwksRequests.map((r) => r.status)).toEqual([200, 500, 500, 304]);
  });

  it('keeps the last good key set when a refresh answers a document without usable keys', async () => {
    h = await startHarness(NO_STALENESS_BOUND);
    await h.verifier.ready;
    h.plane.keys = [];
    h.clock.now += 300_000;
    await h.verifier.verify(await mint(h.key, credentialClaims(h.clock.now)));
    expect(h.plane.jwksRequests.map((r) => r.status)).toEqual([200, 200]);
    expect(h.errors).toHaveLength(1);
  });

  it('refuses as jwks_unavailable until a key set was ever fetched, and recovers by itself', async () => {
    h = await startHarness({ ...NO_STALENESS_BOUND, backoffInitialMs: 20, backoffMaxMs: 40 }, (plane) => {
      plane.jwksStatus = 503;
    });
    const token = await mint(h.key, credentialClaims(h.clock.now));
    await h.plane.waitForRequest((r) => r.status === 503);
    expect(await refusal(h.verifier.verify(token))).toBe('jwks_unavailable');

    h.plane.jwksStatus = 200;
    await h.verifier.ready;
    expect((await h.verifier.verify(token)).jti).toMatch(/^crd_/);
    expect(h.plane.jwksRequests.at(-1)?.status).toBe(200);
  });
});
