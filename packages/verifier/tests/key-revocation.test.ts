import { afterEach, describe, expect, it } from 'vitest';
import { eventually, type Harness, refusal, startHarness } from './support/harness.ts';
import { credentialClaims, generateSigningKey, mint } from './support/tokens.ts';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

/** Signing key revocations from the feed (docs/credentials.md, "Revoking a signing key"). */
describe('signing key revocation from the revocation feed', () => {
  it("refuses the revoked key's credentials within one feed round trip and refetches the JWKS at once", async () => {
    h = await startHarness({ revocationWaitSeconds: 25 });
    const harness = h;
    const replacement = await generateSigningKey();
    harness.plane.keys = [harness.key, replacement];
    await harness.verifier.ready;
    const old = await mint(harness.key, credentialClaims(harness.clock.now));
    expect((await harness.verifier.verify(old)).pid).toBe('prj_7hQ2');
    await harness.plane.waitForHeldPoll();
    const jwksBefore = harness.plane.jwksRequests.length;

    const recordedAt = harness.plane.revokeKey(harness.key.kid);
    await eventually(() => harness.verifier.isKeyRevoked(harness.key.kid));
    const learntMs = performance.now() - recordedAt;
    expect(learntMs).toBeLessThan(1_000);
    expect(await refusal(harness.verifier.verify(old))).toBe('revoked');
    // A credential of the key signed later (any jti) is refused too: the kid decides.
    expect(
      await refusal(harness.verifier.verify(await mint(harness.key, credentialClaims(harness.clock.now)))),
    ).toBe('revoked');
    // The key set was refetched at once, not at its max-age (300 s, the clock has not moved).
    await eventually(() => harness.plane.jwksRequests.length > jwksBefore);
    const fresh = await mint(replacement, credentialClaims(harness.clock.now));
    expect((await harness.verifier.verify(fresh)).pid).toBe('prj_7hQ2');
    await eventually(() => harness.verifier.metrics().jwksKeys === 1);
    expect(harness.verifier.metrics()).toMatchObject({
      revokedKeys: 1,
      jwksKeys: 1,
      jwksRevocationRefetches: 1,
    });
    expect(harness.verifier.isKeyRevoked(replacement.kid)).toBe(false);
    // Learnt once: later answers listing it again refetch nothing more.
    const jwksAfter = harness.plane.jwksRequests.length;
    harness.plane.revoke('crd_other', harness.clock.now / 1000 + 600);
    await eventually(() => harness.verifier.isRevoked('crd_other'));
    expect(harness.plane.jwksRequests.length).toBe(jwksAfter);
  });

  it('never uses the revoked key again, even when a cache in front of the control plane still lists it', async () => {
    h = await startHarness({ revocationWaitSeconds: 25 });
    const harness = h;
    await harness.verifier.ready;
    await harness.plane.waitForHeldPoll();
    const keys = harness.plane.keys;
    const jwksBefore = harness.plane.jwksRequests.length;
    harness.plane.revokeKey(harness.key.kid);
    // The stale cache: the JWKS keeps listing the key.
    harness.plane.keys = keys;
    await eventually(() => harness.plane.jwksRequests.length > jwksBefore);
    await eventually(() => harness.verifier.metrics().jwksRevocationRefetches === 1);
    expect(
      await refusal(harness.verifier.verify(await mint(harness.key, credentialClaims(harness.clock.now)))),
    ).toBe('revoked');
    expect(harness.verifier.metrics().jwksKeys).toBe(0);
  });

  it('verifies a key created by the revocation at once, even if it was not yet published when the JWKS was refetched', async () => {
    // Unknown kids may refetch only every 60 s: the revocation lifts that limit once.
    h = await startHarness({ revocationWaitSeconds: 25, refetchIntervalMs: 60_000 });
    const harness = h;
    await harness.verifier.ready;
    await harness.plane.waitForHeldPoll();
    const jwksBefore = harness.plane.jwksRequests.length;
    harness.plane.revokeKey(harness.key.kid);
    await eventually(() => harness.plane.jwksRequests.length > jwksBefore);
    await eventually(() => harness.verifier.metrics().jwksRevocationRefetches === 1);
    // Published only now (the refetch above answered the set without it).
    const created = await generateSigningKey();
    harness.plane.keys = [created];
    await new Promise((resolve) => setTimeout(resolve, 50));
    const credential = await mint(created, credentialClaims(harness.clock.now));
    expect((await harness.verifier.verify(credential)).pid).toBe('prj_7hQ2');
    // The limit is back: another unknown kid does not refetch.
    const requests = harness.plane.jwksRequests.length;
    const stranger = await generateSigningKey();
    expect(
      await refusal(harness.verifier.verify(await mint(stranger, credentialClaims(harness.clock.now)))),
    ).toBe('unknown_kid');
    expect(harness.plane.jwksRequests.length).toBe(requests);
  });

  it('reads the backlog at start: a key revoked before the verifier started is refused from the first verification', async () => {
    h = await startHarness({}, (plane) => {
      plane.revokeKey('kid-revoked-earlier');
    });
    await h.verifier.ready;
    expect(h.verifier.isKeyRevoked('kid-revoked-earlier')).toBe(true);
    expect(h.verifier.metrics().revokedKeys).toBe(1);
    expect((await h.verifier.verify(await mint(h.key, credentialClaims(h.clock.now)))).pid).toBe('prj_7hQ2');
  });

  it('without relayToken nothing is known about revoked keys', async () => {
    h = await startHarness({ relayToken: undefined, revocationsUrl: undefined });
    await h.verifier.ready;
    expect(h.verifier.isKeyRevoked(h.key.kid)).toBe(false);
    expect(h.verifier.metrics()).toMatchObject({ followsRevocations: false, revokedKeys: 0 });
  });
});
