import { createServer } from 'node:net';
import { AppError } from '@relayplane/contract/errors';
import { AdminService } from '@relayplane/proto/admin';
import {
  AUDIT_UNAVAILABLE_MESSAGE,
  AuditOutbox,
  type AuditOutboxDatabase,
  enqueueAuditEvent,
  newAuditEventId,
  systemActor,
} from '@relayplane/shared/audit-outbox';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { createRegistry } from '@relayplane/shared/metrics';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import { connect } from '@relayplane/shared/rpc';
import { type Kysely, sql } from 'kysely';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { type RecordingAdmin, startRecordingAdmin } from '../../src/recording-admin.ts';
import { createTestDatabase, type TestDatabase } from '../../src/storage.ts';
import { waitFor } from './conformance/wait.ts';

/** What a service's schema holds: the outbox and a table standing for the service's own data. */
interface Tables extends AuditOutboxDatabase {
  things: { id: string };
}

const SCHEMA = 'outboxed';
const TENANT = 'ten_0123456789abcdefghjk';

// The same table as the issuer's and billing's migrations (20261129T1000-audit-outbox).
const MIGRATIONS = {
  '20261129T1000-audit-outbox': {
    // biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped database
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('things')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .execute();
      await db.schema
        .createTable('audit_outbox')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('occurred_at', 'timestamptz', (c) => c.notNull())
        .addColumn('tenant_id', 'text')
        .addColumn('actor_type', 'text', (c) => c.notNull())
        .addColumn('actor_id', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('target_type', 'text', (c) => c.notNull())
        .addColumn('target_id', 'text', (c) => c.notNull())
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('ip', 'text', (c) => c.notNull())
        .addColumn('user_agent', 'text', (c) => c.notNull())
        .addColumn('request_id', 'text', (c) => c.notNull())
        .addColumn('details', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('last_error', 'text')
        .addColumn('failed_at', 'timestamptz')
        .execute();
    },
  },
};

/** Polls an async condition every 20 ms until it holds (fails after `timeoutMs`). */
async function until(what: string, condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return address.port;
}

describe('audit outbox (PostgreSQL, a real gRPC admin)', () => {
  let testDb: TestDatabase;
  let database: Database<Tables>;
  let db: Kysely<Tables>;
  const cleanup: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase('audit_outbox');
    database = await createDatabase<Tables>(
      { kind: 'postgres', url: testDb.url },
      SCHEMA,
      testLogger('outbox'),
    );
    await database.migrate(MIGRATIONS);
    db = database.db;
  });

  afterAll(async () => {
    await database.destroy();
    await testDb.drop();
  });

  beforeEach(async () => {
    await sql`truncate outboxed.audit_outbox, outboxed.things`.execute(db);
    await sql`drop schema if exists recorded_audit cascade`.execute(db);
  });

  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  function outbox(
    admin: { address: string } | string,
    options: { db?: Kysely<Tables>; metrics?: ReturnType<typeof createRegistry> } = {},
  ): AuditOutbox {
    const client = connect(AdminService, typeof admin === 'string' ? admin : admin.address, {
      retries: false,
    });
    const box = new AuditOutbox({
      db: (options.db ?? db) as unknown as Kysely<AuditOutboxDatabase>,
      source: 'issuer',
      admin: client,
      logger: testLogger('outbox'),
      backoffMs: { initial: 50, max: 400 },
      ...(options.metrics ? { metrics: options.metrics } : {}),
    });
    cleanup.push(async () => {
      await box.stop();
      client.close();
    });
    return box;
  }

  async function recordingAdmin(port = 0): Promise<RecordingAdmin> {
    const admin = await startRecordingAdmin(testDb.url, port);
    cleanup.push(() => admin.close());
    return admin;
  }

  async function change(
    id: string,
    action: 'credential.revoke' | 'relay.register' = 'credential.revoke',
  ): Promise<string> {
    let eventId = '';
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('things').values({ id }).execute();
      eventId = await enqueueAuditEvent(trx, {
        action,
        tenantId: TENANT,
        target: { type: 'credential', id },
        details: { n: 1 },
      });
    });
    return eventId;
  }

  const outboxRows = async () =>
    (
      await sql<{
        id: string;
        attempts: number;
        failed_at: Date | null;
      }>`select id, attempts, failed_at from outboxed.audit_outbox order by id`.execute(db)
    ).rows;
  const things = async () =>
    (await sql<{ id: string }>`select id from outboxed.things`.execute(db)).rows.length;

  it('writes the event in the caller’s transaction: a rolled-back change leaves no event', async () => {
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('things').values({ id: 'a' }).execute();
        await enqueueAuditEvent(trx, {
          action: 'relay.delete',
          tenantId: null,
          target: { type: 'relay', id: 'a' },
        });
        throw new Error('the change fails after its event');
      }),
    ).rejects.toThrow('the change fails after its event');
    expect(await outboxRows()).toEqual([]);
    expect(await things()).toBe(0);
  });

  it('refuses the change with internal, writing no row, for an event admin would refuse on delivery (a secret, a bad action, no target type, an unknown actor)', async () => {
    const secret = `svc_live_${'ab'.repeat(32)}`;
    const invalid: [string, Parameters<typeof enqueueAuditEvent>[1]][] = [
      [
        'details carry a secret at details.leaked',
        {
          action: 'relay.register',
          tenantId: null,
          target: { type: 'relay', id: 'r' },
          details: { leaked: secret },
        },
      ],
      [
        'action must be <resource>.<verb>',
        { action: 'Relay-Register' as 'relay.register', tenantId: null, target: { type: 'relay', id: 'r' } },
      ],
      [
        'target.type is required',
        { action: 'relay.register', tenantId: null, target: { type: '', id: 'r' } },
      ],
      [
        'actor.type is not an actor type',
        {
          action: 'relay.register',
          tenantId: null,
          target: { type: 'relay', id: 'r' },
          actor: { type: 'robot' as 'bot', id: 'x' },
        },
      ],
    ];
    for (const [problem, event] of invalid) {
      const err = await db
        .transaction()
        .execute(async (trx) => {
          await trx.insertInto('things').values({ id: 'refused' }).execute();
          await enqueueAuditEvent(trx, event);
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('internal');
      expect((err as AppError).message).toContain(problem);
      expect((err as AppError).message).not.toContain(secret);
    }
    expect(await outboxRows()).toEqual([]);
    expect(await things()).toBe(0);
    const all = await sql<{
      row: string;
    }>`select row_to_json(o)::text as row from outboxed.audit_outbox o`.execute(db);
    expect(JSON.stringify(all.rows)).not.toContain(secret);
  });

  it('refuses the change with unavailable when the event cannot be written (a trigger raising)', async () => {
    await sql`create function outboxed.refuse() returns trigger language plpgsql as $$ begin raise exception 'audit outbox refused'; end $$`.execute(
      db,
    );
    await sql`create trigger refuse before insert on outboxed.audit_outbox for each row execute function outboxed.refuse()`.execute(
      db,
    );
    try {
      const err = await change('b').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('unavailable');
      expect((err as AppError).httpStatus).toBe(503);
      expect((err as AppError).retryAfterSeconds).toBeGreaterThan(0);
      expect((err as AppError).message).toBe(AUDIT_UNAVAILABLE_MESSAGE);
      expect(await things()).toBe(0);
      expect(await outboxRows()).toEqual([]);
    } finally {
      await sql`drop trigger refuse on outboxed.audit_outbox`.execute(db);
      await sql`drop function outboxed.refuse()`.execute(db);
    }
  });

  it('delivers the request’s actor, address, user agent and request id, the target and details', async () => {
    const admin = await recordingAdmin();
    const box = outbox(admin);
    box.start();
    const before = Date.now();
    const id = await runWithRequestContext(
      {
        requestId: 'req-123',
        clientIp: '203.0.113.9',
        userAgent: 'curl/8.5',
        actor: { type: 'user', id: 'usr_x' },
      },
      () => change('c'),
    );
    const after = Date.now();
    box.kick();
    // Recorded, not only received: a call is listed in `calls` before its insert commits.
    await until('the event recorded by admin', async () => (await admin.events()).length === 1);
    const [event] = await admin.events();
    expect(event).toMatchObject({
      id,
      source: 'issuer',
      tenantId: TENANT,
      actor: { type: 'user', id: 'usr_x' },
      action: 'credential.revoke',
      target: { type: 'credential', id: 'c' },
      outcome: 'success',
      ip: '203.0.113.9',
      userAgent: 'curl/8.5',
      requestId: 'req-123',
      details: { n: 1 },
    });
    // When the change was made, not when it was delivered.
    expect(event?.occurredAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(event?.occurredAt.getTime()).toBeLessThanOrEqual(after);
    await until('the row deleted', async () => (await outboxRows()).length === 0);
  });

  it('without a request: a job’s system actor, or anonymous, and empty address fields', async () => {
    const admin = await recordingAdmin();
    const box = outbox(admin);
    box.start();
    await db.transaction().execute(async (trx) => {
      await enqueueAuditEvent(trx, {
        action: 'signing_key.rotate',
        tenantId: null,
        target: { type: 'signing_key', id: 'kid1' },
        actor: systemActor('issuer-key-maintenance'),
      });
      await enqueueAuditEvent(trx, {
        action: 'relay.delete',
        tenantId: null,
        target: { type: 'relay', id: 'r' },
      });
    });
    box.kick();
    await until('two events recorded by admin', async () => (await admin.events()).length >= 2);
    const events = await admin.events();
    expect(events.map((e) => [e.action, e.actor, e.tenantId, e.ip, e.requestId])).toEqual([
      ['signing_key.rotate', { type: 'system', id: 'issuer-key-maintenance' }, '', '', ''],
      ['relay.delete', { type: 'anonymous', id: '' }, '', '', ''],
    ]);
  });

  it('keeps events while admin is down and delivers each exactly once when it is back, oldest first', async () => {
    const port = await freePort();
    const metrics = createRegistry();
    const box = outbox(`127.0.0.1:${port}`, { metrics });
    box.start();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await change(`d${i}`));
    box.kick();
    // Failed passes leave every row, each attempt counted on it.
    await until('two failed attempts', async () => {
      const rows = await outboxRows();
      expect(rows.map((r) => r.id)).toEqual(ids);
      return rows.every((r) => r.attempts >= 2);
    });
    const failures = await metrics.getSingleMetricAsString('relayplane_audit_outbox_delivery_failures_total');
    expect(Number(/_total (\d+)/.exec(failures)?.[1])).toBeGreaterThanOrEqual(2);

    const admin = await recordingAdmin(port);
    await until('the outbox emptied', async () => (await outboxRows()).length === 0);
    const events = await admin.events();
    expect(events.map((e) => e.id)).toEqual(ids);
    expect(ids).toEqual([...ids].sort());
    const pending = await metrics.getSingleMetricAsString('relayplane_audit_outbox_pending');
    expect(pending).toMatch(/relayplane_audit_outbox_pending 0$/m);
  });

  it('sends again when admin’s answer is lost; admin’s table holds each event once', async () => {
    const admin = await recordingAdmin();
    let lost = 0;
    admin.before = () => (lost++ === 0 ? 'record-then-fail' : undefined);
    const box = outbox(admin);
    box.start();
    const ids = [await change('e1'), await change('e2')];
    box.kick();
    await until('the outbox emptied', async () => (await outboxRows()).length === 0);
    // Sent twice (the first answer was lost), recorded once.
    expect(admin.calls.flat().filter((id) => id === ids[0])).toHaveLength(2);
    expect((await admin.events()).map((e) => e.id)).toEqual(ids);
  });

  it('two deliverers on two connections never send the same event twice', async () => {
    const admin = await recordingAdmin();
    // A slow admin, so the two deliverers' passes overlap.
    admin.before = () => new Promise((resolve) => setTimeout(() => resolve(undefined), 15));
    const other = await createDatabase<Tables>(
      { kind: 'postgres', url: testDb.url },
      SCHEMA,
      testLogger('outbox-2'),
    );
    cleanup.push(() => other.destroy());
    const a = outbox(admin);
    const b = outbox(admin, { db: other.db });
    a.start();
    b.start();
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      ids.push(await change(`f${i}`));
      (i % 2 ? a : b).kick();
    }
    await waitFor('every event at admin', () => new Set(admin.calls.flat()).size >= ids.length, 15_000);
    const sent = admin.calls.flat();
    expect(sent).toHaveLength(ids.length);
    expect(new Set(sent)).toEqual(new Set(ids));
    // One deliverer at a time: admin received them in the order they were written.
    expect(sent).toEqual(ids);
  });

  it('sets aside an event admin refuses as invalid and delivers the ones behind it', async () => {
    const admin = await recordingAdmin();
    const poison = await change('g0', 'relay.register');
    admin.before = async (events) => {
      if (events.some((e) => e.id === poison)) throw new AppError('invalid_request', 'unknown action');
      return undefined;
    };
    const good = await change('g1');
    const box = outbox(admin);
    box.start();
    await waitFor('the good event at admin', () => admin.calls.some((c) => c.length === 1 && c[0] === good));
    await until('the refused event set aside', async () => {
      const rows = await outboxRows();
      return rows.length === 1 && rows[0]?.failed_at != null;
    });
    const [kept] = await outboxRows();
    expect(kept?.id).toBe(poison);
    expect((await admin.events()).map((e) => e.id)).toEqual([good]);
  });

  it('stop() waits for the pass in flight and delivers nothing after', async () => {
    const admin = await recordingAdmin();
    let release: () => void = () => {};
    let entered = false;
    admin.before = () => {
      entered = true;
      return new Promise((resolve) => {
        release = () => resolve(undefined);
      });
    };
    const box = outbox(admin);
    box.start();
    await change('h0');
    box.kick();
    await waitFor('a pass at admin', () => entered);
    let stopped = false;
    const stopping = box.stop().then(() => {
      stopped = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(stopped).toBe(false);
    release();
    await stopping;
    admin.before = undefined;
    const calls = admin.calls.length;
    await change('h1');
    box.kick();
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(admin.calls.length).toBe(calls);
    expect((await outboxRows()).length).toBe(1);
  });

  it('makes time-ordered UUIDv7 ids', () => {
    const ids = Array.from({ length: 5000 }, () => newAuditEventId(1_700_000_000_000));
    expect(ids).toEqual([...ids].sort());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids.slice(0, 3))
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(newAuditEventId(Date.parse('2030-01-01T00:00:00Z')) > (ids.at(-1) ?? '')).toBe(true);
  });
});
