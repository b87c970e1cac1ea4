import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKek, type RunningIssuer, startIssuer } from './support/harness.ts';

/**
 * Relays verify against whatever JWKS they fetched; across a rotation, every credential that
 * has not expired must keep verifying against the current key set.
 */
describe('credentials across a signing key rotation', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;
  const clock = new ManualClock(Date.now());
  const TTL = 3600;

  beforeAll(async () => {
    database = await createTestDatabase('issuer_rotation_creds');
    // In-memory slot store (no Redis): this test is about keys, not caps.
    issuer = await startIssuer({ databaseUrl: database.url, clock, kek: newKek() });
  });
  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
  });

  const issue = async () =>
    issuer.client.issueCredential({
      tenantId: newId('tenant'),
      projectId: newId('project'),
      apiKeyId: newId('apiKey'),
      mode: 'live',
      scopes: ['relay:session'],
      ttlSeconds: TTL,
      region: '',
      maxConcurrentConnections: 100,
    });

  /** Verifies like a relay with a fresh copy of the JWKS, at the test clock's time. */
  const verifies = async (token: string) => {
    const jwks = createLocalJWKSet(
      issuer.service.keys.jwks() as unknown as Parameters<typeof createLocalJWKSet>[0],
    );
    try {
      await jwtVerify(token, jwks, { algorithms: ['EdDSA'], currentDate: clock.now() });
      return true;
    } catch {
      return false;
    }
  };

  it('keeps every unexpired credential verifiable through next → active → previous → removed', async () => {
    const before = await issue();
    const oldKid = decodeProtectedHeader(before.token).kid;
    expect(await verifies(before.token)).toBe(true);

    // Rotate: pending until the next key has been published for 300 s.
    await issuer.service.keys.rotate('test');
    expect(decodeProtectedHeader((await issue()).token).kid).toBe(oldKid);
    clock.advance(301_000);
    await issuer.service.keys.tick();

    const after = await issue();
    const newKid = decodeProtectedHeader(after.token).kid;
    expect(newKid).not.toBe(oldKid);
    // The old credential still verifies (its key is now "previous"), and so does the new one.
    expect(await verifies(before.token)).toBe(true);
    expect(await verifies(after.token)).toBe(true);

    // Just before the old credential expires: still verifiable after another maintenance run.
    clock.advance((TTL - 301 - 5) * 1000);
    await issuer.service.keys.tick();
    expect(await verifies(before.token)).toBe(true);

    // The old key stays listed until every credential it could have signed has expired:
    // deactivation (t+301 s) + the longest TTL (3600 s) + 60 s of clock skew.
    clock.advance(120_000);
    await issuer.service.keys.tick();
    expect(await verifies(before.token)).toBe(false); // expired by now
    expect(issuer.service.keys.jwks().keys.map((k) => k.kid)).toContain(oldKid);
    clock.advance(300_000);
    await issuer.service.keys.tick();
    const kids = issuer.service.keys.jwks().keys.map((k) => k.kid);
    expect(kids).not.toContain(oldKid);
    expect(kids[0]).toBe(newKid);
    const latest = await issue();
    expect(decodeProtectedHeader(latest.token).kid).toBe(newKid);
    expect(await verifies(latest.token)).toBe(true);
  });
});
