import { afterEach, describe, expect, it } from 'vitest';
import { createVerifier } from '../src/index.ts';
import { eventually, type Harness, refusal, startHarness } from './support/harness.ts';
import { credentialClaims, mint } from './support/tokens.ts';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

const FAST_RETRIES = { backoffInitialMs: 20, backoffMaxMs: 40, revocationWaitSeconds: 1 };

/** `maxFeedStaleness` and `onStaleFeed` (README, "Feed staleness"). */
describe('revocation feed staleness', () => {
  it('fails closed by default: past 60 s without a successful poll every credential is refused with feed_stale, and says so in metrics', async () => {
    h = await startHarness(FAST_RETRIES);
    const harness = h;
    await harness.verifier.ready;
    const token = await mint(harness.key, credentialClaims(harness.clock.now));
    expect((await harness.verifier.verify(token)).pid).toBe('prj_7hQ2');
    expect(harness.verifier.metrics()).toMatchObject({
      followsRevocations: true,
      maxFeedStalenessMs: 60_000,
      onStaleFeed: 'closed',
      feedStale: false,
      failingClosed: false,
      failingOpen: false,
    });

    // The feed fails from now on; the clock reaches the bound, then passes it.
    harness.plane.feedFailuresRemaining = 1_000_000;
    const failures = harness.plane.feedRequests.filter((r) => r.status === 500).length;
    await harness.plane.waitForRequest(
      (r) => r.status === 500 && harness.plane.feedRequests.filter((q) => q.status === 500).length > failures,
    );
    const lastSuccess = harness.verifier.metrics().feedLastSuccessAt ?? 0;
    harness.clock.now = lastSuccess + 60_000;
    expect((await harness.verifier.verify(token)).pid).toBe('prj_7hQ2');
    harness.clock.now = lastSuccess + 60_001;
    expect(await refusal(harness.verifier.verify(token))).toBe('feed_stale');
    expect(harness.verifier.metrics()).toMatchObject({
      feedStalenessMs: 60_001,
      feedStale: true,
      failingClosed: true,
      failingOpen: false,
      staleRefusals: 1,
      staleAcceptances: 0,
    });
    // A credential refused for its own reason keeps it.
    const expired = await mint(harness.key, credentialClaims(harness.clock.now - 700_000));
    expect(await refusal(harness.verifier.verify(expired))).toBe('expired');

    // The feed answers again: the next successful poll ends it.
    harness.plane.feedFailuresRemaining = 0;
    await eventually(() => !harness.verifier.metrics().feedStale);
    expect((await harness.verifier.verify(token)).pid).toBe('prj_7hQ2');
    expect(harness.verifier.metrics()).toMatchObject({ failingClosed: false, staleRefusals: 1 });
  });

  it("onStaleFeed 'open' accepts what passes every other check, still applies what it learnt, and counts it", async () => {
    h = await startHarness({ ...FAST_RETRIES, maxFeedStaleness: 5_000, onStaleFeed: 'open' });
    const harness = h;
    await harness.verifier.ready;
    const revokedClaims = credentialClaims(harness.clock.now);
    const revoked = await mint(harness.key, revokedClaims);
    harness.plane.revoke(String(revokedClaims.jti), harness.clock.now / 1000 + 600);
    await eventually(() => harness.verifier.isRevoked(String(revokedClaims.jti)));
    harness.plane.feedFailuresRemaining = 1_000_000;
    await harness.plane.waitForRequest((r) => r.status === 500);
    harness.clock.now = (harness.verifier.metrics().feedLastSuccessAt ?? 0) + 5_001;

    const token = await mint(harness.key, credentialClaims(harness.clock.now));
    expect((await harness.verifier.verify(token)).pid).toBe('prj_7hQ2');
    expect(await refusal(harness.verifier.verify(revoked))).toBe('revoked');
    expect(harness.verifier.metrics()).toMatchObject({
      maxFeedStalenessMs: 5_000,
      onStaleFeed: 'open',
      feedStale: true,
      failingClosed: false,
      failingOpen: true,
      staleAcceptances: 1,
      staleRefusals: 0,
    });
  });

  it('failing closed, refuses with feed_not_ready until the first successful poll, then accepts (issue 31)', async () => {
    h = await startHarness({ ...FAST_RETRIES, maxFeedStaleness: 10_000 }, (plane) => {
      plane.feedFailuresRemaining = 1_000_000;
    });
    const harness = h;
    await harness.plane.waitForRequest((r) => r.status === 500);
    const token = await mint(harness.key, credentialClaims(harness.clock.now));
    await eventually(() => harness.verifier.metrics().jwksKeys === 1);
    expect(harness.verifier.metrics().feedLastSuccessAt).toBeNull();
    // Well within maxFeedStaleness, and yet nothing is known of revocations: refused.
    expect(await refusal(harness.verifier.verify(token))).toBe('feed_not_ready');
    expect(harness.verifier.metrics().notReadyRefusals).toBe(1);
    harness.plane.feedFailuresRemaining = 0;
    await eventually(() => harness.verifier.metrics().feedLastSuccessAt !== null);
    expect((await harness.verifier.verify(token)).pid).toBe('prj_7hQ2');
  });

  it('refuses with feed_not_ready before the first successful poll even without a staleness bound (maxFeedStaleness Infinity), after every other check', async () => {
    h = await startHarness({ ...FAST_RETRIES, maxFeedStaleness: Number.POSITIVE_INFINITY }, (plane) => {
      plane.feedFailuresRemaining = 1_000_000;
    });
    const harness = h;
    await harness.plane.waitForRequest((r) => r.status === 500);
    await eventually(() => harness.verifier.metrics().jwksKeys === 1);
    const now = harness.clock.now;
    expect(await refusal(harness.verifier.verify(await mint(harness.key, credentialClaims(now))))).toBe(
      'feed_not_ready',
    );
    // A credential wrong on its own is refused for that: feed_not_ready says nothing else was wrong.
    const expired = credentialClaims(now - 3_600_000);
    expect(await refusal(harness.verifier.verify(await mint(harness.key, expired)))).toBe('expired');
    expect(harness.verifier.metrics()).toMatchObject({ notReadyRefusals: 1, staleRefusals: 0 });
    harness.plane.feedFailuresRemaining = 0;
    await harness.verifier.ready;
    expect((await harness.verifier.verify(await mint(harness.key, credentialClaims(now)))).pid).toBe(
      'prj_7hQ2',
    );
  });

  it('failing open, counts staleness from the verifier’s creation until the first successful poll', async () => {
    h = await startHarness({ ...FAST_RETRIES, maxFeedStaleness: 10_000, onStaleFeed: 'open' }, (plane) => {
      plane.feedFailuresRemaining = 1_000_000;
    });
    const harness = h;
    await harness.plane.waitForRequest((r) => r.status === 500);
    await eventually(() => harness.verifier.metrics().jwksKeys === 1);
    expect(
      (await harness.verifier.verify(await mint(harness.key, credentialClaims(harness.clock.now)))).pid,
    ).toBe('prj_7hQ2');
    expect(harness.verifier.metrics()).toMatchObject({ feedStale: false, staleAcceptances: 0 });
    harness.clock.now += 10_001;
    await harness.verifier.verify(await mint(harness.key, credentialClaims(harness.clock.now)));
    expect(harness.verifier.metrics()).toMatchObject({
      feedStalenessMs: 10_001,
      failingOpen: true,
      staleAcceptances: 1,
    });
  });

  it('has no bound without relayToken (no feed), and refuses settings that cannot work', async () => {
    h = await startHarness({ relayToken: undefined, revocationsUrl: undefined });
    await h.verifier.ready;
    h.clock.now += 3_600_000;
    expect((await h.verifier.verify(await mint(h.key, credentialClaims(h.clock.now)))).pid).toBe('prj_7hQ2');
    expect(h.verifier.metrics()).toMatchObject({
      followsRevocations: false,
      maxFeedStalenessMs: null,
      onStaleFeed: null,
      feedStalenessMs: null,
      feedStale: false,
    });
    const base = { baseUrl: 'http://127.0.0.1:9', relayToken: 't' };
    expect(() => createVerifier({ ...base, maxFeedStaleness: 25_000 })).toThrow(/maxFeedStaleness/);
    expect(() => createVerifier({ ...base, revocationWaitSeconds: 0, maxFeedStaleness: 1_000 })).toThrow(
      /maxFeedStaleness/,
    );
    expect(() => createVerifier({ ...base, maxFeedStaleness: Number.NaN })).toThrow(/maxFeedStaleness/);
    expect(() => createVerifier({ ...base, onStaleFeed: 'sideways' as unknown as 'open' })).toThrow(
      /onStaleFeed/,
    );
  });
});
