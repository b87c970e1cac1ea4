import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { timestampDate, timestampFromMs } from '@bufbuild/protobuf/wkt';
import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisKeys } from '../src/redis/keys.ts';
import { DEMO_RELAYS } from '../src/relays/relay-config.ts';
import { issueRequest, newKek, type RunningIssuer, rejection, startIssuer } from './support/harness.ts';

/**
 * Containment of a leaked API key (docs/credentials.md, "Containment"): RevokeCredentials,
 * the project watermark, the revoked-key refusal at issuance, ListCredentials. Two issuer
 * replicas on one PostgreSQL database and one Redis, over real gRPC.
 */
describe('credential containment (two replicas, real gRPC, PostgreSQL and Redis)', () => {
  const redis = createTestRedis('issuer_containment');
  const keys = redisKeys(redis.prefix);
  const admin = new Redis(redis.url);
  let database: TestDatabase;
  let a: RunningIssuer;
  let b: RunningIssuer;
  const clock = new ManualClock(Date.now());

  const slotsOf = (tenantId: string) => admin.zrange(keys.slots(tenantId), '0', '-1');
  const scope = () => ({ tenantId: newId('tenant'), projectId: newId('project'), apiKeyId: newId('apiKey') });
  type Scope = ReturnType<typeof scope>;
  const issue = async (s: Scope, n: number, cap = 100) => {
    const issued = [];
    for (let i = 0; i < n; i++) {
      issued.push(await a.client.issueCredential(issueRequest(s, { maxConcurrentConnections: cap })));
    }
    return issued;
  };
  const active = async (token: string) => (await b.client.introspectCredential({ token })).active;

  beforeAll(async () => {
    database = await createTestDatabase('issuer_containment');
    const kek = newKek();
    a = await startIssuer({ databaseUrl: database.url, clock, kek, redis });
    b = await startIssuer({ databaseUrl: database.url, clock, kek, redis });
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    admin.disconnect();
    await database?.drop();
    await redis.clean();
  });

  it("revokes a revoked API key's live credentials at once: inactive, refused at assignment, in the feed, slots freed, key refused after", async () => {
    const s = scope();
    const other = { ...s, apiKeyId: newId('apiKey') };
    const elsewhere = { ...s, projectId: newId('project'), apiKeyId: newId('apiKey') };
    const leaked = await issue(s, 5);
    const kept = await issue(other, 2);
    const unrelated = await issue(elsewhere, 1);
    expect((await slotsOf(s.tenantId)).length).toBe(8);
    const before = await b.client.listRevocations({ cursor: 0n, limit: 1000 });
    let cursor = before.nextCursor;
    for (;;) {
      const page = await b.client.listRevocations({ cursor, limit: 1000 });
      if (page.revocations.length === 0) break;
      cursor = page.nextCursor;
    }

    const res = await a.client.revokeCredentials({
      tenantId: s.tenantId,
      projectId: s.projectId,
      apiKeyId: s.apiKeyId,
      apiKeyRevoked: true,
    });
    expect(res.revoked).toBe(5);

    for (const c of leaked) {
      expect(await active(c.token)).toBe(false);
      expect((await rejection(b.client.assignRelays({ token: c.token, region: '' }))).code).toBe(
        'unauthenticated',
      );
    }
    for (const c of [...kept, ...unrelated]) expect(await active(c.token)).toBe(true);
    expect((await slotsOf(s.tenantId)).sort()).toEqual([...kept, ...unrelated].map((c) => c.jti).sort());
    const feed = await b.client.listRevocations({ cursor, limit: 1000 });
    expect(feed.revocations.map((r) => r.jti).sort()).toEqual(leaked.map((c) => c.jti).sort());
    for (const c of leaked) expect(await admin.exists(keys.revoked(c.jti))).toBe(1);

    // A repeat revokes nothing more; the key can no longer get a credential on any replica.
    expect(
      (
        await b.client.revokeCredentials({
          tenantId: s.tenantId,
          projectId: s.projectId,
          apiKeyId: s.apiKeyId,
          apiKeyRevoked: true,
        })
      ).revoked,
    ).toBe(0);
    for (const issuer of [a, b]) {
      const err = await rejection(
        issuer.client.issueCredential(issueRequest(s, { maxConcurrentConnections: 100 })),
      );
      expect(err.code).toBe('unauthenticated');
      expect(err.message).toBe('invalid or expired token');
    }
    const rows = await sql<{
      n: string;
    }>`select count(*) as n from issuer.credentials where api_key_id = ${s.apiKeyId}`.execute(
      a.service.database.db,
    );
    expect(Number(rows.rows[0]?.n)).toBe(5);
    expect((await slotsOf(s.tenantId)).length).toBe(3);
    // The other key of the project still issues.
    expect(
      (await a.client.issueCredential(issueRequest(other, { maxConcurrentConnections: 100 }))).token,
    ).toMatch(/^ey/);
  });

  it("revokes a key's credentials without revoking the key: the key keeps issuing, and no table lock is taken", async () => {
    const s = scope();
    const leaked = await issue(s, 3);
    const db = a.service.database.db;
    // A transaction holding ROW EXCLUSIVE on credentials (as every insert does) for the whole call:
    // a revocation that took the table lock (SHARE ROW EXCLUSIVE) would wait for it.
    const res = await db.connection().execute(async (conn) => {
      await sql`begin`.execute(conn);
      try {
        await sql`lock table issuer.credentials in row exclusive mode`.execute(conn);
        return await a.client.revokeCredentials({
          tenantId: s.tenantId,
          projectId: s.projectId,
          apiKeyId: s.apiKeyId,
        });
      } finally {
        await sql`rollback`.execute(conn);
      }
    });
    expect(res.revoked).toBe(3);
    for (const c of leaked) expect(await active(c.token)).toBe(false);
    const recorded =
      await sql`select 1 from issuer.revoked_api_keys where api_key_id = ${s.apiKeyId}`.execute(db);
    expect(recorded.rows).toEqual([]);
    // The key is still active (admin was not asked to revoke it): it obtains new credentials on both replicas.
    for (const issuer of [a, b]) {
      const fresh = await issuer.client.issueCredential(issueRequest(s, { maxConcurrentConnections: 100 }));
      expect(await active(fresh.token)).toBe(true);
    }
    expect((await slotsOf(s.tenantId)).length).toBe(2);
  });

  it('revoking the key itself waits at most the lock timeout for the table lock: then unavailable, nothing changed', async () => {
    const s = scope();
    const issued = await issue(s, 2);
    const db = a.service.database.db;
    const started = performance.now();
    const err = await db.connection().execute(async (conn) => {
      await sql`begin`.execute(conn);
      try {
        await sql`lock table issuer.credentials in row exclusive mode`.execute(conn);
        return await rejection(
          a.client.revokeCredentials({
            tenantId: s.tenantId,
            projectId: s.projectId,
            apiKeyId: s.apiKeyId,
            apiKeyRevoked: true,
          }),
        );
      } finally {
        await sql`rollback`.execute(conn);
      }
    });
    const took = performance.now() - started;
    expect(err.code).toBe('unavailable');
    expect(err.message).toMatch(/nothing was changed, retry shortly/);
    expect(err.retryAfterSeconds).toBeGreaterThan(0);
    expect(took).toBeGreaterThanOrEqual(1_900);
    expect(took).toBeLessThan(4_500);
    for (const c of issued) expect(await active(c.token)).toBe(true);
    const recorded =
      await sql`select 1 from issuer.revoked_api_keys where api_key_id = ${s.apiKeyId}`.execute(db);
    expect(recorded.rows).toEqual([]);
    expect((await slotsOf(s.tenantId)).length).toBe(2);
    // The lock released, the retry succeeds.
    expect(
      (
        await a.client.revokeCredentials({
          tenantId: s.tenantId,
          projectId: s.projectId,
          apiKeyId: s.apiKeyId,
          apiKeyRevoked: true,
        })
      ).revoked,
    ).toBe(2);
  });

  it('records the bulk revocation as credentials.bulk_revoke in the audit outbox, without any token', async () => {
    const s = scope();
    const issued = await issue(s, 3);
    await a.client.revokeCredentials({ tenantId: s.tenantId, projectId: s.projectId, apiKeyId: s.apiKeyId });
    const rows = await sql<{
      action: string;
      target_type: string;
      target_id: string;
      details: unknown;
      tenant_id: string;
    }>`
      select action, target_type, target_id, details, tenant_id from issuer.audit_outbox
      where tenant_id = ${s.tenantId}`.execute(a.service.database.db);
    expect(
      rows.rows.map((r) => ({
        ...r,
        details: typeof r.details === 'string' ? JSON.parse(r.details) : r.details,
      })),
    ).toEqual([
      {
        action: 'credentials.bulk_revoke',
        tenant_id: s.tenantId,
        target_type: 'project',
        target_id: s.projectId,
        details: { api_key_id: s.apiKeyId, issued_before: null, revoked: 3 },
      },
    ]);
    const text = JSON.stringify(rows.rows);
    for (const c of issued) expect(text).not.toContain(c.token.split('.')[2]);
  });

  it('leaves no credential of a key live when issuance races the revocation of the key', async () => {
    // Each round races 150 issuances on two replicas against one revocation of a fresh key. The
    // race is only shown by a round where some issuances landed before the revocation (answered,
    // then revoked by it) and some after (refused): the start of the revocation is moved until
    // one does, and every round must leave no live credential of its key. The move is a
    // bisection between the latest start known to be too early (all refused) and the earliest
    // known to be too late (all answered): doubling and halving alone can swing between two
    // starts on either side of a window narrower than their gap (40 ms all refused, 80 ms all
    // answered, and back, under CI's load).
    let delayMs = 5;
    let tooEarly = 0;
    let tooLate = Number.POSITIVE_INFINITY;
    const rounds: string[] = [];
    for (let round = 0; round < 12; round++) {
      const s = scope();
      // 15 waves of 10, a millisecond apart: sent at once, the 150 can land in one INSERT, which
      // the revocation's lock puts wholly before or wholly after it (CI saw that at every start
      // from 35.0 to 35.1 ms), and no round could show the race.
      const racing = Array.from({ length: 150 }, (_, i) =>
        new Promise((resolve) => setTimeout(resolve, Math.floor(i / 10))).then(() =>
          (i % 2 ? a : b).client.issueCredential(issueRequest(s, { maxConcurrentConnections: 1000 })).then(
            (r) => ({ ok: true as const, jti: r.jti, token: r.token }),
            (err: { code?: string }) => ({ ok: false as const, code: err.code }),
          ),
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      const revoked = await a.client.revokeCredentials({
        tenantId: s.tenantId,
        projectId: s.projectId,
        apiKeyId: s.apiKeyId,
        apiKeyRevoked: true,
      });
      const outcomes = await Promise.all(racing);
      const answered = outcomes.filter((o) => o.ok);
      const refused = outcomes.filter((o) => !o.ok);
      // Every answered credential was recorded before the revocation, so it revoked it.
      expect(answered.length).toBe(revoked.revoked);
      for (const o of refused) expect(o.code).toBe('unauthenticated');
      const live = await sql<{ jti: string }>`select jti from issuer.credentials
        where api_key_id = ${s.apiKeyId} and revoked_at is null`.execute(a.service.database.db);
      expect(live.rows).toEqual([]);
      for (const o of answered) expect(await active(o.token)).toBe(false);
      expect(await slotsOf(s.tenantId)).toEqual([]);
      rounds.push(`${delayMs} ms: ${answered.length} answered (all revoked), ${refused.length} refused`);
      if (answered.length > 0 && refused.length > 0) break;
      // All refused: revoke later; all answered: revoke sooner.
      if (answered.length === 0) tooEarly = delayMs;
      else tooLate = delayMs;
      delayMs = Number.isFinite(tooLate) ? Math.round(((tooEarly + tooLate) / 2) * 10) / 10 : delayMs * 2;
    }
    console.log(`race rounds: ${rounds.join('; ')}`);
    const last = rounds.at(-1) ?? '';
    expect(last, rounds.join('; ')).toMatch(/: [1-9]\d* answered \(all revoked\), [1-9]\d* refused$/);
  });

  it('issued_before revokes older credentials and sets a watermark the feed carries and introspection applies', async () => {
    const s = scope();
    const old = await issue(s, 3);
    clock.advance(10_000);
    const fresh = await issue({ ...s, apiKeyId: newId('apiKey') }, 2);
    const cut = clock.now().getTime() - 5_500;

    // A held poll wakes for the watermark.
    const head = await a.client.listRevocations({ cursor: 0n, limit: 1 });
    let cursor = head.nextCursor;
    for (;;) {
      const page = await a.client.listRevocations({ cursor, limit: 1000 });
      if (page.revocations.length === 0) break;
      cursor = page.nextCursor;
    }
    const started = performance.now();
    const held = b.client.listRevocations({ cursor, limit: 1000, waitMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const res = await a.client.revokeCredentials({
      tenantId: s.tenantId,
      projectId: s.projectId,
      issuedBefore: timestampFromMs(cut),
    });
    expect(res.revoked).toBe(3);
    const woke = await held;
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(woke.revocations.map((r) => r.jti).sort()).toEqual(old.map((c) => c.jti).sort());
    const mark = woke.watermarks.find((w) => w.projectId === s.projectId);
    // Rounded up to a whole second (iat is in seconds).
    expect(mark?.issuedBefore && timestampDate(mark.issuedBefore).getTime()).toBe(
      Math.ceil(cut / 1000) * 1000,
    );
    expect(woke.nextCursor).toBeGreaterThan(woke.revocations.at(-1)?.sequence ?? 0n);
    for (const c of old) expect(await active(c.token)).toBe(false);
    for (const c of fresh) expect(await active(c.token)).toBe(true);

    // The watermark refuses an old credential even without its revocation (row and mark undone).
    const victim = old[0] as (typeof old)[number];
    await sql`update issuer.credentials set revoked_at = null where jti = ${victim.jti}`.execute(
      a.service.database.db,
    );
    await admin.del(keys.revoked(victim.jti));
    expect(await active(victim.token)).toBe(false);
    expect((await rejection(a.client.assignRelays({ token: victim.token, region: '' }))).code).toBe(
      'unauthenticated',
    );

    // Only raised: an earlier instant changes nothing and wakes nobody.
    const after = await b.client.listRevocations({ cursor: woke.nextCursor, limit: 1000 });
    expect(after.nextCursor).toBe(woke.nextCursor);
    await a.client.revokeCredentials({
      tenantId: s.tenantId,
      projectId: s.projectId,
      issuedBefore: timestampFromMs(cut - 60_000),
    });
    const still = await b.client.listRevocations({ cursor: woke.nextCursor, limit: 1000 });
    expect(still.nextCursor).toBe(woke.nextCursor);
    expect(still.watermarks.find((w) => w.projectId === s.projectId)?.issuedBefore).toEqual(
      mark?.issuedBefore,
    );
  });

  it('audit or refuse: when the outbox row cannot be written, nothing is revoked, recorded or raised (503)', async () => {
    const s = scope();
    const issued = await issue(s, 2);
    const db = a.service.database.db;
    await sql`create function issuer.refuse_bulk_audit() returns trigger language plpgsql as $$
      begin if new.action = 'credentials.bulk_revoke' then raise exception 'audit outbox refused (test)'; end if;
      return new; end $$`.execute(db);
    await sql`create trigger refuse_bulk_audit before insert on issuer.audit_outbox
      for each row execute function issuer.refuse_bulk_audit()`.execute(db);
    try {
      const err = await rejection(
        a.client.revokeCredentials({
          ...s,
          apiKeyRevoked: true,
          issuedBefore: timestampFromMs(clock.now().getTime()),
        }),
      );
      expect(err.code).toBe('unavailable');
      expect(err.retryAfterSeconds).toBeGreaterThan(0);
    } finally {
      await sql`drop trigger refuse_bulk_audit on issuer.audit_outbox`.execute(db);
      await sql`drop function issuer.refuse_bulk_audit()`.execute(db);
    }
    for (const c of issued) expect(await active(c.token)).toBe(true);
    const marks =
      await sql`select 1 from issuer.project_watermarks where project_id = ${s.projectId}`.execute(db);
    expect(marks.rows).toEqual([]);
    const keys = await sql`select 1 from issuer.revoked_api_keys where api_key_id = ${s.apiKeyId}`.execute(
      db,
    );
    expect(keys.rows).toEqual([]);
    expect((await slotsOf(s.tenantId)).length).toBe(2);
    expect(
      (await a.client.issueCredential(issueRequest(s, { maxConcurrentConnections: 100 }))).token,
    ).toMatch(/^ey/);
  });

  it('refuses a bulk revocation without a filter, with a future issued_before, or with malformed ids', async () => {
    const s = scope();
    const cases = [
      [{ tenantId: s.tenantId, projectId: s.projectId }, /api_key_id, issued_before or both/],
      [{ ...s, issuedBefore: timestampFromMs(clock.now().getTime() + 60_000) }, /must not be in the future/],
      [{ ...s, tenantId: 'nope' }, /tenant_id/],
      [{ ...s, projectId: 'key_x' }, /project_id/],
      [{ ...s, apiKeyId: 'prj_x' }, /api_key_id/],
      [
        {
          tenantId: s.tenantId,
          projectId: s.projectId,
          apiKeyRevoked: true,
          issuedBefore: timestampFromMs(0),
        },
        /api_key_revoked needs the api_key_id/,
      ],
    ] as const;
    for (const [req, message] of cases) {
      const err = await rejection(a.client.revokeCredentials(req));
      expect(err.code).toBe('invalid_request');
      expect(err.message).toMatch(message);
    }
  });

  it('lists credentials newest first, filtered by key and activity, page by page with an opaque cursor', async () => {
    const s = scope();
    const k2 = { ...s, apiKeyId: newId('apiKey') };
    const issued: { jti: string; apiKeyId: string }[] = [];
    for (let i = 0; i < 7; i++) {
      const key = i % 3 === 0 ? k2 : s;
      const [c] = await issue(key, 1);
      issued.push({ jti: c?.jti ?? '', apiKeyId: key.apiKeyId });
      clock.advance(1_000);
    }
    await a.client.revokeCredential({ tenantId: s.tenantId, jti: issued[1]?.jti });
    // Another tenant's credentials of the same project id never show.
    await issue({ ...s, tenantId: newId('tenant') }, 1);

    const pages: string[][] = [];
    let cursor = '';
    do {
      const page = await b.client.listCredentials({
        tenantId: s.tenantId,
        projectId: s.projectId,
        limit: 3,
        cursor,
      });
      pages.push(page.credentials.map((c) => c.jti));
      for (const c of page.credentials) {
        expect(c.expiresAt && c.issuedAt && timestampDate(c.expiresAt) > timestampDate(c.issuedAt)).toBe(
          true,
        );
        expect(Object.keys(c)).not.toContain('token');
      }
      cursor = page.nextCursor;
    } while (cursor);
    expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
    expect(pages.flat()).toEqual(issued.map((c) => c.jti).reverse());

    const all = await a.client.listCredentials({ tenantId: s.tenantId, projectId: s.projectId });
    expect(all.nextCursor).toBe('');
    expect(all.credentials.find((c) => c.jti === issued[1]?.jti)?.revokedAt).toBeDefined();
    expect(all.credentials.find((c) => c.jti === issued[2]?.jti)?.revokedAt).toBeUndefined();

    const otherProject = await rejection(
      a.client.listCredentials({ tenantId: s.tenantId, projectId: 'prj_\u0000' }),
    );
    expect(otherProject.code).toBe('invalid_request');
    expect(otherProject.message).toMatch(/project_id/);

    const byKey = await a.client.listCredentials({
      tenantId: s.tenantId,
      projectId: s.projectId,
      apiKeyId: k2.apiKeyId,
    });
    expect(byKey.credentials.map((c) => c.jti)).toEqual(
      issued
        .filter((c) => c.apiKeyId === k2.apiKeyId)
        .map((c) => c.jti)
        .reverse(),
    );
    expect(byKey.credentials.every((c) => c.apiKeyId === k2.apiKeyId)).toBe(true);

    const live = await a.client.listCredentials({
      tenantId: s.tenantId,
      projectId: s.projectId,
      active: true,
    });
    expect(live.credentials.map((c) => c.jti)).toEqual(
      issued
        .filter((_, i) => i !== 1)
        .map((c) => c.jti)
        .reverse(),
    );

    const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    for (const [req, message] of [
      [{ limit: 201 }, /limit/],
      [{ cursor: 'not-a-cursor' }, /cursor/],
      [{ cursor: Buffer.from('[1,"x"]').toString('base64url') }, /cursor/],
      // A safe integer past the last instant a Date holds.
      [{ cursor: cursorOf([Number.MAX_SAFE_INTEGER, issued[0]?.jti]) }, /cursor/],
      [{ cursor: cursorOf([-8_640_000_000_000_001, issued[0]?.jti]) }, /cursor/],
      // PostgreSQL refuses a NUL byte in text (22021): refused before it gets there.
      [{ apiKeyId: 'key_\u0000' }, /api_key_id must be an API key id/],
      [{ apiKeyId: s.projectId }, /api_key_id must be an API key id/],
    ] as const) {
      const err = await rejection(
        a.client.listCredentials({ tenantId: s.tenantId, projectId: s.projectId, ...req }),
      );
      expect(err.code).toBe('invalid_request');
      expect(err.message).toMatch(message);
    }
  });
});

/** The same calls in embedded mode: PGlite, no Redis (in-memory slots, in-process bus). */
describe('credential containment in embedded mode (PGlite, no Redis)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'issuer-embedded-containment-'));
  const clock = new ManualClock(Date.now());
  let issuer: RunningIssuer;

  beforeAll(async () => {
    issuer = await startIssuer({
      databaseUrl: 'postgres://unused.invalid/none',
      clock,
      kek: newKek(),
      config: { database: { kind: 'pglite', dataDir }, relays: DEMO_RELAYS },
    });
  });

  afterAll(async () => {
    await issuer?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('revokes by key and by watermark, refuses the revoked key, frees slots and lists', async () => {
    const s = { tenantId: newId('tenant'), projectId: newId('project'), apiKeyId: newId('apiKey') };
    const req = (over: Partial<typeof s> = {}) =>
      issueRequest({ ...s, ...over }, { maxConcurrentConnections: 3 });
    const leaked = [await issuer.client.issueCredential(req()), await issuer.client.issueCredential(req())];
    const otherKey = newId('apiKey');
    const kept = await issuer.client.issueCredential(req({ apiKeyId: otherKey }));
    expect((await rejection(issuer.client.issueCredential(req()))).code).toBe('payment_required');

    const { nextCursor } = await issuer.client.listRevocations({ cursor: 0n });
    const poll = issuer.client.listRevocations({ cursor: nextCursor, waitMs: 10_000 });
    expect(
      (
        await issuer.client.revokeCredentials({
          tenantId: s.tenantId,
          projectId: s.projectId,
          apiKeyId: s.apiKeyId,
          apiKeyRevoked: true,
        })
      ).revoked,
    ).toBe(2);
    expect((await poll).revocations.map((r) => r.jti).sort()).toEqual(leaked.map((c) => c.jti).sort());
    for (const c of leaked)
      expect((await issuer.client.introspectCredential({ token: c.token })).active).toBe(false);
    expect((await rejection(issuer.client.issueCredential(req()))).code).toBe('unauthenticated');
    // Their slots are free: the other key takes two more (cap 3).
    await issuer.client.issueCredential(req({ apiKeyId: otherKey }));
    await issuer.client.issueCredential(req({ apiKeyId: otherKey }));

    clock.advance(2_000);
    const res = await issuer.client.revokeCredentials({
      tenantId: s.tenantId,
      projectId: s.projectId,
      issuedBefore: timestampFromMs(clock.now().getTime()),
    });
    expect(res.revoked).toBe(3);
    expect((await issuer.client.introspectCredential({ token: kept.token })).active).toBe(false);
    const feed = await issuer.client.listRevocations({ cursor: 0n, limit: 1000 });
    expect(feed.watermarks.map((w) => w.projectId)).toEqual([s.projectId]);
    const listed = await issuer.client.listCredentials({ tenantId: s.tenantId, projectId: s.projectId });
    expect(listed.credentials).toHaveLength(5);
    expect(listed.credentials.every((c) => c.revokedAt !== undefined)).toBe(true);
  });
});
