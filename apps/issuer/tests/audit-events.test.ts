/**
 * The issuer's audit events (docs/audit.md): each change commits with its outbox row and is
 * delivered to admin's RecordAuditEvents — here a real gRPC server recording into PostgreSQL
 * (@relayplane/testing/recording-admin); tests/e2e/audit-outbox.test.ts runs them into admin.
 */

import { newId } from '@relayplane/contract/ids';
import { KeyState } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import {
  type RecordedEvent,
  type RecordingAdmin,
  startRecordingAdmin,
} from '@relayplane/testing/recording-admin';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  issueRequest,
  newKek,
  type RunningIssuer,
  rejection,
  seconds,
  startIssuer,
} from './support/harness.ts';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const ROTATION_INTERVAL = 86_400;
const ADMIN_REQUEST = {
  requestId: 'req-issuer-audit',
  clientIp: '198.51.100.7',
  userAgent: 'relayplane-cli/1.0',
  actor: { type: 'user' as const, id: 'usr_0123456789abcdefghjk' },
};

describe('issuer audit events through the outbox (real gRPC, real PostgreSQL)', () => {
  let database: TestDatabase;
  let admin: RecordingAdmin;
  let issuer: RunningIssuer;
  const clock = new ManualClock(T0);

  /** The recorded events with `action`, once at least `count` arrived (the outbox delivers within 2 s). */
  async function delivered(action: string, count = 1, timeoutMs = 2_000): Promise<RecordedEvent[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const events = (await admin.events()).filter((e) => e.action === action);
      if (events.length >= count) return events;
      if (Date.now() > deadline)
        throw new Error(`${action}: ${events.length} of ${count} events within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  const outboxRows = async () =>
    Number(
      (
        await sql<{ n: string }>`select count(*) as n from issuer.audit_outbox`.execute(
          issuer.service.database.db,
        )
      ).rows[0]?.n,
    );

  beforeAll(async () => {
    database = await createTestDatabase('issuer_audit');
    admin = await startRecordingAdmin(database.url);
    issuer = await startIssuer({
      databaseUrl: database.url,
      clock,
      kek: newKek(),
      env: {
        ISSUER_ADMIN_ADDRESS: admin.address,
        ISSUER_KEY_ROTATION_INTERVAL_SECONDS: String(ROTATION_INTERVAL),
        ISSUER_MAX_CREDENTIAL_TTL_SECONDS: '900',
        // The scheduled maintenance job runs every second (real timers), on the test's clock.
        ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS: '1',
      },
    });
  });

  afterAll(async () => {
    await issuer?.stop();
    await admin?.close();
    await database?.drop();
  });

  it('records credential.revoke with the caller’s actor, address and request id', async () => {
    const key = { tenantId: newId('tenant'), projectId: newId('project'), apiKeyId: newId('apiKey') };
    const issued = await issuer.client.issueCredential(issueRequest(key));
    await runWithRequestContext(ADMIN_REQUEST, () =>
      issuer.client.revokeCredential({ tenantId: key.tenantId, jti: issued.jti }),
    );
    const [event] = (await delivered('credential.revoke')).filter((e) => e.target.id === issued.jti);
    expect(event).toMatchObject({
      source: 'issuer',
      tenantId: key.tenantId,
      actor: ADMIN_REQUEST.actor,
      target: { type: 'credential', id: issued.jti },
      outcome: 'success',
      ip: ADMIN_REQUEST.clientIp,
      userAgent: ADMIN_REQUEST.userAgent,
      requestId: ADMIN_REQUEST.requestId,
    });
    expect(JSON.stringify(event)).not.toContain(issued.token);
    // A repeated revocation changes nothing and records nothing more.
    await issuer.client.revokeCredential({ tenantId: key.tenantId, jti: issued.jti });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await admin.events()).filter((e) => e.target.id === issued.jti)).toHaveLength(1);
    expect(await outboxRows()).toBe(0);
  });

  it('refuses a revocation with 503 + Retry-After and revokes nothing when the outbox row cannot be written', async () => {
    const key = { tenantId: newId('tenant'), projectId: newId('project'), apiKeyId: newId('apiKey') };
    const issued = await issuer.client.issueCredential(issueRequest(key));
    const db = issuer.service.database.db;
    await sql`create function issuer.refuse_audit() returns trigger language plpgsql as $$ begin raise exception 'audit outbox refused (test)'; end $$`.execute(
      db,
    );
    await sql`create trigger refuse_audit before insert on issuer.audit_outbox for each row execute function issuer.refuse_audit()`.execute(
      db,
    );
    try {
      const err = await rejection(
        issuer.client.revokeCredential({ tenantId: key.tenantId, jti: issued.jti }),
      );
      expect(err.code).toBe('unavailable');
      expect(err.httpStatus).toBe(503);
      expect(err.retryAfterSeconds).toBeGreaterThan(0);
      const row = await sql<{
        revoked_at: Date | null;
      }>`select revoked_at from issuer.credentials where jti = ${issued.jti}`.execute(db);
      expect(row.rows[0]?.revoked_at).toBeNull();
      const feed = await sql`select 1 from issuer.revocations where jti = ${issued.jti}`.execute(db);
      expect(feed.rows).toHaveLength(0);
      expect((await issuer.client.introspectCredential({ token: issued.token })).active).toBe(true);

      // A relay registration is refused the same way, and no relay is created.
      const relayErr = await rejection(
        issuer.client.registerRelay({ region: 'eu', host: 'refused.example', port: 443 }),
      );
      expect(relayErr.code).toBe('unavailable');
      const relays = await sql`select 1 from issuer.relays where host = 'refused.example'`.execute(db);
      expect(relays.rows).toHaveLength(0);
    } finally {
      await sql`drop trigger refuse_audit on issuer.audit_outbox`.execute(db);
      await sql`drop function issuer.refuse_audit()`.execute(db);
    }
    // Once the outbox accepts rows again, the same call succeeds and is recorded.
    await issuer.client.revokeCredential({ tenantId: key.tenantId, jti: issued.jti });
    const events = (await delivered('credential.revoke', 2)).filter((e) => e.target.id === issued.jti);
    expect(events).toHaveLength(1);
  });

  it('records relay.register (region, host, port; never the relay token) and relay.delete', async () => {
    const { relay, token } = await runWithRequestContext(ADMIN_REQUEST, () =>
      issuer.client.registerRelay({ region: 'eu-west', host: 'relay-1.example', port: 7443 }),
    );
    const id = relay?.id ?? '';
    const [registered] = await delivered('relay.register');
    expect(registered).toMatchObject({
      tenantId: '',
      actor: ADMIN_REQUEST.actor,
      target: { type: 'relay', id },
      details: { region: 'eu-west', host: 'relay-1.example', port: 7443 },
    });
    expect(JSON.stringify(registered)).not.toContain(token);
    await runWithRequestContext(ADMIN_REQUEST, () => issuer.client.deleteRelay({ relayId: id }));
    const [deleted] = await delivered('relay.delete');
    expect(deleted).toMatchObject({
      target: { type: 'relay', id },
      actor: ADMIN_REQUEST.actor,
      outcome: 'success',
    });
  });

  it('records a manual rotation with its caller and a scheduled one with actor system, kids only', async () => {
    const before = (await delivered('signing_key.rotate', 0)).length;
    clock.advance(seconds(400)); // the next key is past the JWKS cache lifetime: eligible
    const listed = await issuer.client.listSigningKeys({});
    const active = listed.keys.find((k) => k.state === KeyState.ACTIVE)?.kid;
    const res = await runWithRequestContext(ADMIN_REQUEST, () =>
      issuer.client.rotateSigningKeys({ requestedBy: 'usr_0123456789abcdefghjk' }),
    );
    expect(res.rotated).toBe(true);
    const manual = (await delivered('signing_key.rotate', before + 1)).at(-1);
    const now = issuer.service.keys.activeSigningKey().kid;
    expect(manual).toMatchObject({
      tenantId: '',
      actor: ADMIN_REQUEST.actor,
      requestId: ADMIN_REQUEST.requestId,
      target: { type: 'signing_key', id: now },
      details: { trigger: 'manual', rotated: true, to_kid: now, requested_by: 'usr_0123456789abcdefghjk' },
    });
    expect(manual?.details.from_kid).not.toBe(now);
    if (active) expect(manual?.details.from_kid).toBe(active);

    // The rotation interval passes (and the new next key is eligible): the job rotates on its own.
    clock.advance(seconds(ROTATION_INTERVAL + 400));
    const scheduled = (await delivered('signing_key.rotate', before + 2, 5_000)).at(-1);
    const rotatedTo = issuer.service.keys.activeSigningKey().kid;
    expect(scheduled).toMatchObject({
      actor: { type: 'system', id: 'issuer-key-maintenance' },
      ip: '',
      requestId: '',
      target: { type: 'signing_key', id: scheduled?.details.to_kid },
      details: { trigger: 'scheduled', rotated: true, from_kid: now },
    });
    expect(rotatedTo).toBe(scheduled?.details.to_kid);
    // Kids, never key material.
    const text = JSON.stringify(scheduled);
    expect(text).not.toMatch(/"(d|x|private|sealed|ciphertext)"/);
  });
});
