/**
 * Revoking a compromised signing key (docs/credentials.md, "Revoking a signing key"):
 * RevokeSigningKey on two issuer replicas sharing PostgreSQL and Redis, over real gRPC, with a
 * recording admin behind the audit outbox.
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { newId } from '@relayplane/contract/ids';
import { KeyState } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import { type RecordingAdmin, startRecordingAdmin } from '@relayplane/testing/recording-admin';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  issueRequest,
  newKek,
  type RunningIssuer,
  rawKeyRows,
  rejection,
  startIssuer,
} from './support/harness.ts';

const ADMIN_REQUEST = {
  requestId: 'req-key-revoke',
  clientIp: '198.51.100.9',
  userAgent: 'relayplane-cli/1.0',
  actor: { type: 'user' as const, id: 'usr_0123456789abcdefghjk' },
};
const MAX_TTL_SECONDS = 900;

/** The `kid` of a credential's JWT header. */
const kidOf = (token: string): string =>
  JSON.parse(Buffer.from(token.split('.')[0] ?? '', 'base64url').toString('utf8')).kid;

describe('RevokeSigningKey (two replicas, real gRPC, PostgreSQL and Redis)', () => {
  const redis = createTestRedis('issuer_key_revoke');
  let database: TestDatabase;
  let admin: RecordingAdmin;
  let a: RunningIssuer;
  let b: RunningIssuer;
  const clock = new ManualClock(Date.now());
  const scope = () => ({ tenantId: newId('tenant'), projectId: newId('project'), apiKeyId: newId('apiKey') });
  const issueOn = (issuer: RunningIssuer) =>
    issuer.client.issueCredential(issueRequest(scope(), { maxConcurrentConnections: 100 }));
  const jwksKids = async (issuer: RunningIssuer) => (await issuer.client.getJwks({})).keys.map((k) => k.kid);
  const activeKid = async () =>
    (await a.client.listSigningKeys({ limit: 200 })).keys.find((k) => k.state === KeyState.ACTIVE)?.kid ?? '';
  /** The feed's cursor after everything recorded so far. */
  async function feedEnd(issuer: RunningIssuer): Promise<bigint> {
    let cursor = 0n;
    for (;;) {
      const page = await issuer.client.listRevocations({ cursor, limit: 1000 });
      if (page.nextCursor === cursor) return cursor;
      cursor = page.nextCursor;
    }
  }

  beforeAll(async () => {
    database = await createTestDatabase('issuer_key_revoke');
    admin = await startRecordingAdmin(database.url);
    const kek = newKek();
    const env = {
      ISSUER_ADMIN_ADDRESS: admin.address,
      ISSUER_MAX_CREDENTIAL_TTL_SECONDS: String(MAX_TTL_SECONDS),
    };
    a = await startIssuer({ databaseUrl: database.url, clock, kek, redis, env });
    b = await startIssuer({ databaseUrl: database.url, clock, kek, redis, env });
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await admin?.close();
    await database?.drop();
    await redis.clean();
  });

  it('revokes the active key: out of every JWKS, its credentials refused, the next key signs at once, the feed names it, audited once', async () => {
    const compromised = await activeKid();
    const next = (await a.client.listSigningKeys({ limit: 200 })).keys.find(
      (k) => k.state === KeyState.NEXT,
    )?.kid;
    expect(next).toBeTruthy();
    const signed = [await issueOn(a), await issueOn(b)];
    for (const c of signed) expect(kidOf(c.token)).toBe(compromised);
    const cursor = await feedEnd(b);
    // A long-poll held on b from the current end of the feed.
    const held = b.client.listRevocations({ cursor, limit: 1000, waitMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const heldSince = performance.now();

    const res = await runWithRequestContext(ADMIN_REQUEST, () =>
      a.client.revokeSigningKey({ kid: compromised, requestedBy: ADMIN_REQUEST.actor.id }),
    );
    expect(res.alreadyRevoked).toBe(false);
    expect(res.revoked?.kid).toBe(compromised);
    expect(res.revoked?.state).toBe(KeyState.REMOVED);
    expect(res.revoked?.revokedAt).toBeDefined();
    expect(res.revoked?.removedAt).toBeDefined();
    // The published next key signs at once (an emergency does not wait for its eligibility).
    expect(res.active?.kid).toBe(next);
    expect(res.active?.state).toBe(KeyState.ACTIVE);

    // The held poll answered at once, with the revoked key and a moved cursor.
    const woken = await held;
    expect(performance.now() - heldSince).toBeLessThan(2_000);
    expect(woken.nextCursor).toBeGreaterThan(cursor);
    expect(woken.revokedKeys.map((k) => k.kid)).toEqual([compromised]);
    expect(woken.revokedKeys[0]?.revokedAt).toEqual(res.revoked?.revokedAt);
    const revokedAt = woken.revokedKeys[0]?.revokedAt;
    if (!revokedAt) throw new Error('no revoked_at');
    expect(timestampDate(revokedAt).getTime()).toBe(clock.now().getTime());

    // Out of both replicas' JWKS (b reloads on the bus message), with the new active key first.
    expect(await jwksKids(a)).not.toContain(compromised);
    await eventually(
      async () => ((await jwksKids(b)).includes(compromised) ? undefined : true),
      'b reloads',
      1_000,
    );
    expect((await jwksKids(b))[0]).toBe(next);
    // The private half is wiped.
    const row = (await rawKeyRows(a.service)).find((r) => r.kid === compromised);
    expect(row?.private_ciphertext).toBeNull();
    expect(row?.removed_at).not.toBeNull();

    for (const issuer of [a, b]) {
      for (const c of signed) {
        expect((await issuer.client.introspectCredential({ token: c.token })).active).toBe(false);
        expect((await rejection(issuer.client.assignRelays({ token: c.token, region: '' }))).code).toBe(
          'unauthenticated',
        );
      }
      // New credentials are signed by the promoted key and verify.
      const fresh = await issueOn(issuer);
      expect(kidOf(fresh.token)).toBe(next);
      expect((await a.client.introspectCredential({ token: fresh.token })).active).toBe(true);
      expect((await b.client.introspectCredential({ token: fresh.token })).active).toBe(true);
    }
    // Maintenance published a new next key.
    const listed = (await a.client.listSigningKeys({ limit: 200 })).keys;
    expect(listed.filter((k) => k.state === KeyState.NEXT)).toHaveLength(1);

    // Audited once, with the caller.
    const events = await eventually(async () => {
      const found = (await admin.events()).filter((e) => e.action === 'signing_key.revoke');
      return found.length > 0 ? found : undefined;
    }, 'the signing_key.revoke event');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      source: 'issuer',
      tenantId: '',
      actor: ADMIN_REQUEST.actor,
      requestId: ADMIN_REQUEST.requestId,
      target: { type: 'signing_key', id: compromised },
      outcome: 'success',
      details: { state: 'active', promoted_kid: next, requested_by: ADMIN_REQUEST.actor.id },
    });

    // A repeat answers the same revocation, changes and records nothing.
    const again = await b.client.revokeSigningKey({ kid: compromised, requestedBy: 'someone else' });
    expect(again.alreadyRevoked).toBe(true);
    expect(again.revoked?.revokedAt).toEqual(res.revoked?.revokedAt);
    expect(again.active?.kid).toBe(next);
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect((await admin.events()).filter((e) => e.action === 'signing_key.revoke')).toHaveLength(1);
    expect((await b.client.listRevocations({ cursor: woken.nextCursor, limit: 1000 })).nextCursor).toBe(
      woken.nextCursor,
    );
  });

  it('answers not_found for an unknown or malformed kid, invalid_request for an oversized requested_by', async () => {
    for (const kid of ['', 'no-such-kid', 'a'.repeat(129), "x' or 1=1"]) {
      expect((await rejection(a.client.revokeSigningKey({ kid, requestedBy: 'u' }))).code).toBe('not_found');
    }
    const kid = await activeKid();
    expect((await rejection(a.client.revokeSigningKey({ kid, requestedBy: 'u'.repeat(201) }))).code).toBe(
      'invalid_request',
    );
    expect(await activeKid()).toBe(kid);
  });

  it('revokes the next key: out of the JWKS, the active key keeps signing, a new next key is published', async () => {
    const active = await activeKid();
    const next = (await a.client.listSigningKeys({ limit: 200 })).keys.find(
      (k) => k.state === KeyState.NEXT,
    )?.kid;
    if (!next) throw new Error('no next key');
    const res = await a.client.revokeSigningKey({ kid: next, requestedBy: 'u' });
    expect(res.active?.kid).toBe(active);
    expect(await jwksKids(a)).not.toContain(next);
    const keys = (await a.client.listSigningKeys({ limit: 200 })).keys;
    const fresh = keys.find((k) => k.state === KeyState.NEXT)?.kid;
    expect(fresh).toBeTruthy();
    expect(fresh).not.toBe(next);
    expect(kidOf((await issueOn(b)).token)).toBe(active);
  });

  it('a replica whose ring still holds the revoked key refuses its credentials and signs again with the replacement', async () => {
    const compromised = await activeKid();
    const signed = await issueOn(b);
    const recordedWith = async (kid: string) =>
      Number(
        (
          await sql<{ n: string }>`select count(*) as n from issuer.credentials where kid = ${kid}`.execute(
            a.service.database.db,
          )
        ).rows[0]?.n,
      );
    const before = await recordedWith(compromised);
    // b stops following key changes: its ring keeps the revoked key until reloaded by hand.
    await b.service.keys.stop();
    try {
      const res = await a.client.revokeSigningKey({ kid: compromised, requestedBy: 'u' });
      const replacement = res.active?.kid ?? '';
      expect(b.service.keys.activeSigningKey().kid).toBe(compromised);
      // Verification on b refuses the revoked key's credential (PostgreSQL knows), ring or no ring.
      expect((await b.client.introspectCredential({ token: signed.token })).active).toBe(false);
      expect((await rejection(b.client.assignRelays({ token: signed.token, region: '' }))).code).toBe(
        'unauthenticated',
      );
      // An issuance on b signs with the revoked key, is refused when recorded, waits for the ring
      // to load the replacement (reloaded here 150 ms later) and signs again with it.
      setTimeout(() => void b.service.keys.reload('refresh'), 150);
      const started = performance.now();
      const fresh = await issueOn(b);
      expect(performance.now() - started).toBeGreaterThanOrEqual(100);
      expect(kidOf(fresh.token)).toBe(replacement);
      expect((await a.client.introspectCredential({ token: fresh.token })).active).toBe(true);
      // No credential signed by the revoked key was recorded after the revocation.
      expect(await recordedWith(compromised)).toBe(before);
    } finally {
      await b.service.keys.start();
    }
  });

  it('with no replacement loaded in time the issuance answers unavailable (retry), never a token of the revoked key', async () => {
    const compromised = await activeKid();
    await b.service.keys.stop();
    try {
      await a.client.revokeSigningKey({ kid: compromised, requestedBy: 'u' });
      const started = performance.now();
      const err = await rejection(issueOn(b));
      expect(err.code).toBe('unavailable');
      expect(err.retryAfterSeconds).toBeGreaterThan(0);
      expect(performance.now() - started).toBeGreaterThanOrEqual(1_900);
    } finally {
      await b.service.keys.start();
    }
    expect(kidOf((await issueOn(b)).token)).not.toBe(compromised);
  });

  it('the feed lists a revoked key until every credential it signed has expired (plus a minute)', async () => {
    const listed = (await b.client.listRevocations({ cursor: 0n, limit: 1000 })).revokedKeys;
    expect(listed.length).toBeGreaterThanOrEqual(3);
    clock.advance((MAX_TTL_SECONDS + 61) * 1000);
    expect((await b.client.listRevocations({ cursor: 0n, limit: 1000 })).revokedKeys).toEqual([]);
  });
});
