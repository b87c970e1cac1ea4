import { afterEach, describe, expect, it, vi } from 'vitest';
import { createVerifier } from '../src/index.ts';
import { FakeControlPlane } from './support/control-plane.ts';
import { eventually, type Harness, refusal, startHarness } from './support/harness.ts';
import { credentialClaims, generateSigningKey, mint } from './support/tokens.ts';

let h: Harness | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await h?.dispose();
  h = undefined;
});

const iso = (ms: number) => new Date(ms).toISOString();

describe('learning revocations from the feed', () => {
  it('a revocation is known within one feed round-trip: measured latency under 1000 ms', async () => {
    h = await startHarness();
    await h.verifier.ready;
    const latencies: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      const claims = credentialClaims(h.clock.now);
      const token = await mint(h.key, claims);
      await h.verifier.verify(token);
      await h.plane.waitForHeldPoll();

      const recordedAt = h.plane.revoke(String(claims.jti), iso((claims.exp as number) * 1000));
      await eventually(() => h?.verifier.isRevoked(String(claims.jti)) === true, 2_000);
      latencies.push(performance.now() - recordedAt);

      expect(await refusal(h.verifier.verify(token))).toBe('revoked');
    }
    const worst = Math.max(...latencies);
    const sorted = [...latencies].sort((a, b) => a - b);
    const summary = { samples: latencies.length, medianMs: sorted[5], worstMs: worst };
    console.log(`revocation latency (server records → isRevoked): ${JSON.stringify(summary)}`);
    expect(worst).toBeLessThan(1_000);
  });

  it('polls with the relay token as bearer, starts at cursor 0 and follows next_cursor', async () => {
    h = await startHarness({ revocationWaitSeconds: 7 });
    await h.verifier.ready;
    await h.plane.waitForHeldPoll();
    h.plane.revoke('crd_a', iso(h.clock.now + 60_000));
    h.plane.revoke('crd_b', iso(h.clock.now + 60_000));
    await h.plane.waitForRequest((r) => r.path.endsWith('/revocations') && r.query.get('cursor') !== '0');

    const [first, second] = h.plane.feedRequests;
    expect(first?.headers.authorization).toBe(`Bearer ${h.plane.relayToken}`);
    expect(first?.query.get('cursor')).toBe('0');
    expect(first?.query.get('wait')).toBe('0'); // catching up must not hold `ready` for a long-poll
    expect(second?.query.get('wait')).toBe('7');
    const cursors = h.plane.feedRequests.map((r) => r.query.get('cursor'));
    expect(['1', '2']).toContain(cursors.at(-1));
    await eventually(() => h?.verifier.isRevoked('crd_b') === true);
    expect(h.verifier.isRevoked('crd_a')).toBe(true);
    expect(h.verifier.isRevoked('crd_c')).toBe(false);
  });

  it('catches up on revocations recorded before the verifier started, before `ready`', async () => {
    h = await startHarness({}, (plane) => {
      plane.revoke('crd_old', Math.floor(Date.now() / 1000) + 600);
    });
    await h.verifier.ready;
    expect(h.verifier.isRevoked('crd_old')).toBe(true); // expires_at as epoch seconds is understood too
  });

  it('remembers a revoked jti until expires_at plus the leeway, so a token inside the leeway stays refused', async () => {
    h = await startHarness();
    await h.verifier.ready;
    const claims = credentialClaims(h.clock.now, { exp: Math.floor(h.clock.now / 1000) + 60 });
    const token = await mint(h.key, claims);
    h.plane.revoke(String(claims.jti), iso((claims.exp as number) * 1000));
    await eventually(() => h?.verifier.isRevoked(String(claims.jti)) === true);

    h.clock.now += 60_000 + 29_000; // expired, but still inside the 30 s leeway
    expect(await refusal(h.verifier.verify(token))).toBe('revoked');
    h.clock.now += 1_000;
    expect(h.verifier.isRevoked(String(claims.jti))).toBe(false);
    expect(await refusal(h.verifier.verify(token))).toBe('expired');
  });
});

describe('feed failures and lifecycle', () => {
  it('backs off exponentially (jittered, capped) while the feed answers 500, and `ready` waits for success', async () => {
    const failures = 6;
    const initial = 40;
    const cap = 160;
    let readyAt = Number.POSITIVE_INFINITY;
    h = await startHarness({ backoffInitialMs: initial, backoffMaxMs: cap }, (plane) => {
      plane.feedFailuresRemaining = failures;
    });
    void h.verifier.ready.then(() => {
      readyAt = performance.now();
    });
    const success = await h.plane.waitForRequest((r) => r.path.endsWith('/revocations') && r.status === 200);
    await h.verifier.ready;

    const polls = h.plane.feedRequests.slice(0, failures + 1);
    expect(polls.map((r) => r.status)).toEqual([500, 500, 500, 500, 500, 500, 200]);
    for (let i = 1; i <= failures; i += 1) {
      const gap = (polls[i]?.at ?? 0) - (polls[i - 1]?.at ?? 0);
      const ceiling = Math.min(cap, initial * 2 ** (i - 1));
      expect(gap, `gap after failure ${i}`).toBeGreaterThanOrEqual(ceiling / 2 - 2);
      expect(gap, `gap after failure ${i}`).toBeLessThan(ceiling + 100);
    }
    expect(readyAt).toBeGreaterThanOrEqual(success.at);
    expect(h.errors.filter((e) => e.message.includes('HTTP 500'))).toHaveLength(failures);
  });

  it('a wrong relay token is reported and retried, never followed', async () => {
    h = await startHarness({ relayToken: 'rnt_wrong', backoffInitialMs: 10, backoffMaxMs: 20 });
    await h.plane.waitForRequest((r) => r.status === 401);
    await eventually(() => (h?.plane.feedRequests.length ?? 0) >= 3);
    expect(h.plane.feedRequests.every((r) => r.status === 401)).toBe(true);
    expect(h.errors.some((e) => e.message.includes('HTTP 401'))).toBe(true);
  });

  it('close() aborts the held long-poll and the loop ends', async () => {
    h = await startHarness();
    await h.verifier.ready;
    await h.plane.waitForHeldPoll();
    const polls = h.plane.feedRequests.length;
    await h.verifier.close();
    await eventually(() => h?.plane.abandonedPolls === 1);
    expect(h.plane.heldPolls).toBe(0);
    expect(h.plane.feedRequests).toHaveLength(polls);
    await expect(h.verifier.verify('a.b.c')).rejects.toThrow('closed');
  });

  it('close() during backoff stops polling: no request in an observation window of ~20 retry periods', async () => {
    h = await startHarness({ backoffInitialMs: 5, backoffMaxMs: 5 }, (plane) => {
      plane.feedFailuresRemaining = Number.POSITIVE_INFINITY;
    });
    await eventually(() => (h?.plane.feedRequests.length ?? 0) >= 3);
    await h.verifier.close();
    const polls = h.plane.feedRequests.length;
    // Proving an absence needs a window; 100 ms is ~20 backoff periods of this verifier.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.plane.feedRequests).toHaveLength(polls);
  });

  it('close() before ready rejects `ready` instead of leaving it pending', async () => {
    h = await startHarness({}, (plane) => {
      plane.feedFailuresRemaining = Number.POSITIVE_INFINITY;
    });
    const ready = h.verifier.ready;
    await h.verifier.close();
    await expect(ready).rejects.toThrow('closed before it was ready');
  });
});

describe('without a relay token', () => {
  it('does not follow the feed, never reports a revocation, and warns loudly', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const plane = await FakeControlPlane.start();
    const key = await generateSigningKey();
    plane.keys = [key];
    plane.revoke('crd_gone', Math.floor(Date.now() / 1000) + 600);
    const verifier = createVerifier({ jwksUrl: `${plane.baseUrl}/v1/credentials/jwks` });
    try {
      await verifier.ready;
      expect(verifier.followsRevocations).toBe(false);
      expect(verifier.isRevoked('crd_gone')).toBe(false);
      const token = await mint(key, credentialClaims(Date.now(), { jti: 'crd_gone' }));
      expect((await verifier.verify(token)).jti).toBe('crd_gone');
      expect(plane.feedRequests).toHaveLength(0);
      expect(String(warn.mock.calls[0]?.[0])).toContain('revoked credentials will be accepted');
    } finally {
      await verifier.close();
      await plane.close();
    }
  });

  it('refuses options that name no JWKS, or a relay token with no feed URL', () => {
    expect(() => createVerifier({})).toThrow(TypeError);
    expect(() => createVerifier({ jwksUrl: 'http://127.0.0.1:1/jwks', relayToken: 'rnt_x' })).toThrow(
      TypeError,
    );
    expect(() => createVerifier({ baseUrl: 'http://127.0.0.1:1', revocationWaitSeconds: 31 })).toThrow(
      TypeError,
    );
  });
});
