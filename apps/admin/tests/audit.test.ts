import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { SERVICES } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { type AuditEvent, AuditEventSchema, type Principal, TenantRole } from '@relayplane/proto/admin';
import { ManualClock } from '@relayplane/shared/clock';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import { testLogger } from '@relayplane/testing/logger';
import { createTestRedis } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventHash, GENESIS_HASH, newEventId } from '../src/audit/canonical.ts';
import { AUDIT_UNAVAILABLE_MESSAGE, AuditTrail } from '../src/audit/trail.ts';
import type { AdminDatabase } from '../src/db/schema.ts';
import { AUDIT_PRUNE_JOB } from '../src/jobs/prune-audit.ts';
import type { AdminService } from '../src/service.ts';
import {
  type AdminRig,
  captureLogs,
  expectAppError,
  OWNER_EMAIL,
  OWNER_PASSWORD,
  principalFor,
  startAdminRig,
} from './support/harness.ts';

const PASSWORD = 'a long enough password';
const DAY_MS = 24 * 60 * 60 * 1000;

describe('audit trail over gRPC (real PostgreSQL, real billing)', () => {
  let rig: AdminRig;
  let admin: AdminService;
  let client: AdminRig['client'];
  const clock = new ManualClock(Date.parse('2026-11-25T12:00:00Z'));
  const logs = captureLogs();
  let seq = 0;

  beforeAll(async () => {
    rig = await startAdminRig(
      'audit',
      {
        RELAYPLANE_BOOTSTRAP_EMAIL: OWNER_EMAIL,
        RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
        RELAYPLANE_BOOTSTRAP_TENANT: 'Platform Ops',
        RELAYPLANE_AUDIT_RETENTION_DAYS: '30',
      },
      { clock, logger: logs.logger },
    );
    ({ admin, client } = rig);
  });

  afterAll(async () => {
    await rig?.close();
  });

  async function newTenant(label: string, plan?: 'pro') {
    const email = `${label}-${++seq}@example.com`;
    const signedUp = await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    if (plan) await rig.billingClient.setPlan({ tenantId: signedUp.tenant?.id ?? '', planId: plan });
    const principal = await principalFor(client, email, PASSWORD);
    return { email, tenantId: signedUp.tenant?.id ?? '', userId: signedUp.user?.id ?? '', principal };
  }

  /** The chain's events, newest first, without the logins (recorded by login.ts) that set up each test. */
  async function listAll(principal: Principal, filters: { tenantId?: string; action?: string } = {}) {
    const { events } = await client.listAuditEvents({ principal, limit: 200, ...filters });
    return events.filter((e) => !e.action.startsWith('session.login'));
  }

  /** Every position links to the one before it, from the genesis hash. */
  function expectLinked(stored: { seq: string | number; prev_hash: string; hash: string }[]) {
    stored.forEach((row, i) => {
      expect(Number(row.seq)).toBe(i + 1);
      expect(row.prev_hash).toBe(i === 0 ? GENESIS_HASH : stored[i - 1]?.hash);
    });
  }

  async function rows(tenantId: string) {
    return admin.database.db
      .selectFrom('audit_events')
      .selectAll()
      .where('chain_key', '=', tenantId)
      .orderBy('seq')
      .execute();
  }

  it('records each change in its tenant chain, linked by prev_hash, and verifies it', async () => {
    const { tenantId, userId, principal } = await newTenant('chain');
    const { project } = await client.createProject({ principal, name: 'web', environment: '' });
    const created = await client.createApiKey({
      principal,
      projectId: project?.id ?? '',
      name: 'ci',
      scopes: [],
    });

    const events = await listAll(principal);
    expect(events.map((e) => e.action)).toEqual(['api_key.create', 'project.create', 'tenant.create']);
    expect(events[0]).toMatchObject({
      tenantId,
      actor: { type: 'user', id: userId },
      target: { type: 'api_key', id: created.apiKey?.id },
      outcome: 'success',
    });
    expect(JSON.parse(events[0]?.detailsJson ?? '')).toMatchObject({ project_id: project?.id, name: 'ci' });
    expect(events[0]?.detailsJson).not.toContain(created.key);
    expect(events[1]).toMatchObject({ target: { type: 'project', id: project?.id } });

    const stored = await rows(tenantId);
    expect(stored.length).toBeGreaterThanOrEqual(3);
    expectLinked(stored);

    await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
      ok: true,
      eventsChecked: BigInt(stored.length),
      firstBadId: '',
    });
  });

  it('takes ip, user agent and request id from the request context, and never a secret', async () => {
    const { tenantId } = await newTenant('context');
    const event = await runWithRequestContext(
      { requestId: 'req-ctx-1', clientIp: '203.0.113.9', userAgent: 'probe/1.0' },
      () =>
        admin.audit.recordAlone({
          action: 'session.login_failed',
          tenantId,
          outcome: 'failure',
          target: { type: 'user', id: 'usr_x' },
        }),
    );
    expect(event).toMatchObject({
      ip: '203.0.113.9',
      userAgent: 'probe/1.0',
      requestId: 'req-ctx-1',
      actor: { type: 'anonymous', id: '' },
    });
    const secret = `svc_live_${'ab'.repeat(32)}`;
    await expectAppError(
      admin.audit.recordAlone({
        action: 'api_key.create',
        tenantId,
        target: { type: 'api_key', id: 'key_x' },
        details: { key: secret },
      }),
      'internal',
    );
    expect(JSON.stringify(await rows(tenantId))).not.toContain(secret);
  });

  it('refuses, with the change, an event RecordAuditEvents would refuse (the shared checks): a bad action, no target type', async () => {
    const { tenantId } = await newTenant('checked');
    const before = (await rows(tenantId)).length;
    await expectAppError(
      admin.audit.recordAlone({
        action: 'Project-Create' as 'project.create',
        tenantId,
        target: { type: 'project', id: 'prj_x' },
      }),
      'internal',
    );
    await expectAppError(
      admin.audit.recordAlone({ action: 'project.create', tenantId, target: { type: '', id: 'prj_x' } }),
      'internal',
    );
    expect((await rows(tenantId)).length).toBe(before);
  });

  it('keeps one chain linear while two connections append concurrently', async () => {
    const { tenantId, principal } = await newTenant('concurrent');
    const baseline = (await rows(tenantId)).length;
    const dbs: Database<AdminDatabase>[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        dbs.push(
          await createDatabase<AdminDatabase>(admin.config.database, SERVICES.admin, testLogger('audit')),
        );
      }
      const trails = dbs.map((d) => new AuditTrail(d.db, clock, testLogger('audit')));
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          trails[i % 2]?.recordAlone({
            action: 'project.create',
            tenantId,
            target: { type: 'project', id: `prj_${i}` },
          }),
        ),
      );
    } finally {
      for (const d of dbs) await d.destroy();
    }
    const stored = await rows(tenantId);
    expect(stored).toHaveLength(baseline + 40);
    expectLinked(stored);
    await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
      ok: true,
      eventsChecked: BigInt(baseline + 40),
    });
  });

  it('reports the edited event when one row is changed in the database', async () => {
    const { tenantId, principal } = await newTenant('tamper', 'pro');
    for (const name of ['a', 'b', 'c']) await client.createProject({ principal, name, environment: '' });
    const stored = await rows(tenantId);
    const at = stored.findIndex((r) => (r.details as { name?: string }).name === 'b');
    const victim = stored[at];
    await sql`update admin.audit_events set details = '{"name":"forged"}'::jsonb where id = ${victim?.id}`.execute(
      admin.database.db,
    );
    await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
      ok: false,
      eventsChecked: BigInt(at + 1),
      firstBadId: victim?.id,
    });

    // Recomputing the hash of the edited row moves the break to the next link.
    const edited = (await rows(tenantId))[at];
    if (!edited) throw new Error('no row');
    const rehashed = eventHash({
      id: edited.id,
      seq: Number(edited.seq),
      occurredAt: edited.occurred_at,
      tenantId: edited.tenant_id,
      actor: { type: edited.actor_type, id: edited.actor_id },
      action: edited.action,
      target: { type: edited.target_type, id: edited.target_id },
      outcome: edited.outcome,
      ip: edited.ip,
      userAgent: edited.user_agent,
      requestId: edited.request_id,
      details: edited.details as { name: string },
      prevHash: edited.prev_hash,
    });
    await sql`update admin.audit_events set hash = ${rehashed} where id = ${edited.id}`.execute(
      admin.database.db,
    );
    await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
      ok: false,
      firstBadId: stored[at + 1]?.id,
    });
  });

  it('reports a deleted newest event (the chain head no longer matches)', async () => {
    const { tenantId, principal } = await newTenant('truncate');
    await client.createProject({ principal, name: 'a', environment: '' });
    const stored = await rows(tenantId);
    const n = stored.length;
    await sql`delete from admin.audit_events where id = ${stored[n - 1]?.id}`.execute(admin.database.db);
    await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
      ok: false,
      eventsChecked: BigInt(n - 1),
      firstBadId: stored[n - 2]?.id,
    });
  });

  it('prunes events past the retention and still verifies from the anchor', async () => {
    const { tenantId, email, principal: first } = await newTenant('prune', 'pro');
    let principal = first;
    await client.createProject({ principal, name: 'old', environment: '' });
    clock.advance(20 * DAY_MS);
    principal = await principalFor(client, email, PASSWORD);
    await client.createProject({ principal, name: 'newer', environment: '' });
    clock.advance(15 * DAY_MS);
    principal = await principalFor(client, email, PASSWORD);
    const before = await rows(tenantId);
    // Retention 30 days: what happened 35 days ago goes (the first project), what happened 15 days ago stays.
    const cutoff = clock.now().getTime() - 30 * DAY_MS;
    const keepFrom = before.findIndex((r) => r.occurred_at.getTime() >= cutoff);
    expect(before.slice(keepFrom).some((r) => (r.details as { name?: string }).name === 'newer')).toBe(true);
    expect(before.slice(0, keepFrom).some((r) => (r.details as { name?: string }).name === 'old')).toBe(true);
    const lastPruned = before[keepFrom - 1];

    expect(await admin.pruneAuditEvents()).toBeGreaterThanOrEqual(keepFrom);
    const after = await rows(tenantId);
    // What was kept, then the pruning's own event (by the job, saying what went).
    expect(after.slice(0, -1).map((r) => r.id)).toEqual(before.slice(keepFrom).map((r) => r.id));
    expect(after.at(-1)).toMatchObject({
      action: 'audit.prune',
      actor_type: 'system',
      actor_id: 'audit-prune',
      details: { deleted: keepFrom, anchor_seq: Number(before[keepFrom - 1]?.seq) },
    });
    const head = await admin.database.db
      .selectFrom('audit_chain_heads')
      .selectAll()
      .where('chain_key', '=', tenantId)
      .executeTakeFirstOrThrow();
    expect(head.anchor_hash).toBe(lastPruned?.hash);
    expect(Number(head.anchor_seq)).toBe(Number(lastPruned?.seq));
    await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
      ok: true,
      eventsChecked: BigInt(after.length),
    });
    // A second run has nothing left to prune here; later events still chain on.
    await admin.pruneAuditEvents();
    expect(await rows(tenantId)).toHaveLength(after.length);
    await client.createProject({ principal, name: 'after-prune', environment: '' });
    await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
      ok: true,
      eventsChecked: BigInt((await rows(tenantId)).length),
      firstBadId: '',
    });
  });

  describe('audit or refuse', () => {
    it('answers unavailable (with a retry hint) and changes nothing when the event cannot be written', async () => {
      const { tenantId, principal } = await newTenant('refuse', 'pro');
      const { project } = await client.createProject({ principal, name: 'kept', environment: '' });
      const db = admin.database.db;
      await sql`create or replace function audit_refuse() returns trigger language plpgsql as $$
        begin raise exception 'audit write refused by the test'; end $$`.execute(db);
      await sql`create trigger audit_refuse before insert on admin.audit_events for each row execute function audit_refuse()`.execute(
        db,
      );
      try {
        const err = await client
          .createProject({ principal, name: 'refused', environment: '' })
          .catch((e) => e);
        expect(err).toBeInstanceOf(AppError);
        expect(err).toMatchObject({ code: 'unavailable', message: AUDIT_UNAVAILABLE_MESSAGE });
        expect((err as AppError).retryAfterSeconds).toBeGreaterThan(0);
        await expectAppError(
          client.createApiKey({ principal, projectId: project?.id ?? '', name: 'refused', scopes: [] }),
          'unavailable',
        );
        await expectAppError(
          client.createBot({
            principal,
            projectId: project?.id ?? '',
            name: 'refused',
            role: TenantRole.DEVELOPER,
          }),
          'unavailable',
        );
      } finally {
        await sql`drop trigger audit_refuse on admin.audit_events`.execute(db);
      }
      const projects = await db
        .selectFrom('projects')
        .select('name')
        .where('tenant_id', '=', tenantId)
        .execute();
      expect(projects.map((p) => p.name)).toEqual(['kept']);
      const keys = await db.selectFrom('api_keys').select('id').where('tenant_id', '=', tenantId).execute();
      expect(keys).toEqual([]);
      const bots = await db.selectFrom('bots').select('id').where('tenant_id', '=', tenantId).execute();
      expect(bots).toEqual([]);
      // The chain is intact and the next change records again.
      await client.createProject({ principal, name: 'later', environment: '' });
      await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
        ok: true,
        eventsChecked: BigInt((await rows(tenantId)).length),
      });
    });
  });

  describe('RecordAuditEvents', () => {
    function delivered(
      tenantId: string,
      over: Omit<MessageInitShape<typeof AuditEventSchema>, '$typeName'> = {},
    ): AuditEvent {
      return create(AuditEventSchema, {
        id: newEventId(clock.now()),
        occurredAt: timestampFromDate(clock.now()),
        tenantId,
        actor: { type: 'user', id: 'usr_deliverer' },
        action: 'credential.revoke',
        target: { type: 'credential', id: 'jti-1' },
        outcome: 'success',
        ip: '198.51.100.7',
        userAgent: 'cli/1',
        requestId: 'req-1',
        detailsJson: '{"reason":"leak"}',
        ...over,
      });
    }

    it('appends delivered events once: a repeated id is a duplicate, not an error', async () => {
      const { tenantId, principal } = await newTenant('deliver');
      const first = delivered(tenantId);
      const second = delivered(tenantId, { action: 'plan.change', target: { type: 'tenant', id: tenantId } });
      await expect(client.recordAuditEvents({ source: 'issuer', events: [first, first] })).resolves.toEqual(
        expect.objectContaining({ recorded: 1, duplicates: 1 }),
      );
      await expect(client.recordAuditEvents({ source: 'billing', events: [second] })).resolves.toEqual(
        expect.objectContaining({ recorded: 1, duplicates: 0 }),
      );
      await expect(client.recordAuditEvents({ source: 'billing', events: [second] })).resolves.toEqual(
        expect.objectContaining({ recorded: 0, duplicates: 1 }),
      );
      const events = await listAll(principal);
      expect(events.slice(0, 2).map((e) => e.id)).toEqual([second.id, first.id]);
      expect(events[1]).toMatchObject({ ip: '198.51.100.7', actor: { type: 'user', id: 'usr_deliverer' } });
      await expect(client.verifyAuditEvents({ principal })).resolves.toMatchObject({
        ok: true,
        eventsChecked: BigInt((await rows(tenantId)).length),
      });
    });

    it('keeps concurrent deliveries of the same events to one copy each', async () => {
      const { tenantId } = await newTenant('deliver-race');
      const events = Array.from({ length: 10 }, () => delivered(tenantId));
      const results = await Promise.all(
        [0, 1, 2].map(() => client.recordAuditEvents({ source: 'issuer', events })),
      );
      expect(results.reduce((n, r) => n + r.recorded, 0)).toBe(10);
      expect(results.reduce((n, r) => n + r.duplicates, 0)).toBe(20);
      expect((await rows(tenantId)).filter((r) => r.action === 'credential.revoke')).toHaveLength(10);
      expectLinked(await rows(tenantId));
    });

    it('refuses another source and malformed events with invalid_request', async () => {
      const { tenantId } = await newTenant('deliver-bad');
      await expectAppError(
        client.recordAuditEvents({ source: 'gateway', events: [delivered(tenantId)] }),
        'invalid_request',
        'source must be one of issuer, billing',
      );
      await expectAppError(
        client.recordAuditEvents({ source: 'issuer', events: [delivered(tenantId, { id: 'not-a-uuid' })] }),
        'invalid_request',
      );
      await expectAppError(
        client.recordAuditEvents({ source: 'issuer', events: [delivered(tenantId, { detailsJson: '[1]' })] }),
        'invalid_request',
      );
      await expectAppError(
        client.recordAuditEvents({ source: 'issuer', events: [delivered(tenantId, { outcome: 'maybe' })] }),
        'invalid_request',
      );
      await expectAppError(
        client.recordAuditEvents({
          source: 'billing',
          events: [delivered(tenantId, { detailsJson: JSON.stringify({ t: `rpu_${'0'.repeat(72)}` }) })],
        }),
        'invalid_request',
      );
      expect((await rows(tenantId)).filter((r) => r.action === 'credential.revoke')).toHaveLength(0);
    });
  });

  describe('signed checkpoints (issue 31)', () => {
    it('the job signs every chain whose head moved, once; the signature opens with the published key only', async () => {
      const { tenantId, principal } = await newTenant('checkpointed');
      await admin.checkpoints.checkpointAll(clock.now());
      // Nothing moved since: nothing signed.
      expect(await admin.checkpoints.checkpointAll(clock.now())).toBe(0);
      const before = await admin.checkpoints.latest(tenantId);
      if (!before) throw new Error('no checkpoint');
      await client.createProject({ principal, name: 'moved', environment: 'production' });
      expect(await admin.checkpoints.checkpointAll(clock.now())).toBe(1);
      const after = await admin.checkpoints.latest(tenantId);
      expect(after?.seq).toBeGreaterThan(before.seq);
      expect(admin.checkpoints.key.open(after?.jws ?? '')).toEqual({
        tenant_id: tenantId,
        seq: after?.seq,
        hash: after?.hash,
        at: clock.now().toISOString(),
      });
      // Another key (here: another KEK's) does not open it.
      const { AuditSigningKey } = await import('../src/audit/checkpoint-key.ts');
      expect(AuditSigningKey.fromKek(Buffer.alloc(32, 99)).open(after?.jws ?? '')).toBeUndefined();
      const listed = await client.listAuditCheckpoints({ principal, limit: 1 });
      expect(listed.checkpoints.map((c) => Number(c.seq))).toEqual([after?.seq]);
      expect(listed.nextCursor).not.toBe('');
      const next = await client.listAuditCheckpoints({ principal, limit: 1, cursor: listed.nextCursor });
      expect(next.checkpoints.map((c) => Number(c.seq))).toEqual([before.seq]);
    });
  });

  describe('what a delivering service may record (issue 31)', () => {
    const event = (
      tenantId: string,
      over: Omit<MessageInitShape<typeof AuditEventSchema>, '$typeName'> = {},
    ) =>
      create(AuditEventSchema, {
        id: newEventId(clock.now()),
        occurredAt: timestampFromDate(clock.now()),
        tenantId,
        actor: { type: 'user', id: 'usr_forger' },
        action: 'plan.change',
        target: { type: 'tenant', id: tenantId },
        outcome: 'success',
        detailsJson: '{}',
        ...over,
      });

    it('refuses an action outside the source own list, and a whole call holding one, recording nothing', async () => {
      const { tenantId } = await newTenant('forge');
      const before = (await rows(tenantId)).length;
      await expectAppError(
        client.recordAuditEvents({
          source: 'billing',
          events: [event(tenantId, { action: 'session.login' })],
        }),
        'invalid_request',
        'billing may not record session.login',
      );
      await expectAppError(
        client.recordAuditEvents({
          source: 'billing',
          events: [event(tenantId), event(tenantId, { action: 'audit.prune' })],
        }),
        'invalid_request',
        'billing may not record audit.prune',
      );
      await expectAppError(
        client.recordAuditEvents({ source: 'issuer', events: [event(tenantId, { action: 'plan.change' })] }),
        'invalid_request',
        'issuer may not record plan.change',
      );
      expect(await rows(tenantId)).toHaveLength(before);
    });

    it('refuses an occurred_at more than 5 minutes from now, either way, and one without it', async () => {
      const { tenantId } = await newTenant('stale');
      const before = (await rows(tenantId)).length;
      const at = (ms: number) => timestampFromDate(new Date(clock.now().getTime() + ms));
      for (const occurredAt of [at(-301_000), at(301_000), undefined]) {
        await expectAppError(
          client.recordAuditEvents({ source: 'billing', events: [event(tenantId, { occurredAt })] }),
          'invalid_request',
          /occurred_at must be within 300 seconds of now/,
        );
      }
      expect(await rows(tenantId)).toHaveLength(before);
      // Within the bound, late or early: recorded.
      await expect(
        client.recordAuditEvents({
          source: 'billing',
          events: [
            event(tenantId, { occurredAt: at(-299_000) }),
            event(tenantId, { occurredAt: at(299_000) }),
          ],
        }),
      ).resolves.toMatchObject({ recorded: 2 });
    });

    it('counts and logs every refusal', async () => {
      const { tenantId } = await newTenant('counted');
      const metric = async () =>
        (await admin.metrics.getSingleMetric('relayplane_audit_delivery_refused_total')?.get())?.values
          .filter((v) => v.labels.source === 'billing' && v.labels.reason === 'action_not_allowed')
          .reduce((n, v) => n + v.value, 0) ?? 0;
      const counted = await metric();
      await client
        .recordAuditEvents({ source: 'billing', events: [event(tenantId, { action: 'relay.register' })] })
        .catch(() => undefined);
      expect(await metric()).toBe(counted + 1);
      const line = await logs.waitFor('audit delivery refused');
      expect(line).toMatchObject({ reason: expect.any(String), declaredSource: expect.any(String) });
    });
  });

  describe('listing', () => {
    it('pages newest first with an opaque cursor, filters, and validates limit and cursor', async () => {
      const { tenantId, userId, principal } = await newTenant('paging', 'pro');
      const ids: string[] = [];
      for (const name of ['p1', 'p2', 'p3', 'p4']) {
        const { project } = await client.createProject({ principal, name, environment: '' });
        ids.push(project?.id ?? '');
      }
      const page1 = await client.listAuditEvents({ principal, limit: 2 });
      expect(page1.events.map((e) => e.target?.id)).toEqual([ids[3], ids[2]]);
      expect(page1.nextCursor).not.toBe('');
      const page2 = await client.listAuditEvents({ principal, limit: 2, cursor: page1.nextCursor });
      expect(page2.events.map((e) => e.target?.id)).toEqual([ids[1], ids[0]]);
      const page3 = await client.listAuditEvents({ principal, limit: 2, cursor: page2.nextCursor });
      expect(page3.events.at(-1)?.action).toBe('tenant.create');
      const all = await rows(tenantId);
      expect(page3.nextCursor).toBe('');

      const byAction = await client.listAuditEvents({ principal, action: 'tenant.create' });
      expect(byAction.events).toHaveLength(1);
      const byTarget = await client.listAuditEvents({ principal, targetId: ids[1] ?? '' });
      expect(byTarget.events.map((e) => e.target?.id)).toEqual([ids[1]]);
      expect((await client.listAuditEvents({ principal, actorId: userId })).events).toHaveLength(
        all.filter((r) => r.actor_id === userId).length,
      );
      expect((await client.listAuditEvents({ principal, actorId: 'usr_nobody' })).events).toHaveLength(0);
      const future = timestampFromDate(new Date(clock.now().getTime() + 1000));
      expect((await client.listAuditEvents({ principal, since: future })).events).toHaveLength(0);
      expect((await client.listAuditEvents({ principal, until: future })).events).toHaveLength(all.length);

      await expectAppError(
        client.listAuditEvents({ principal, limit: 201 }),
        'invalid_request',
        'limit must be between 1 and 200',
      );
      await expectAppError(client.listAuditEvents({ principal, cursor: 'garbage' }), 'invalid_request');
      await expectAppError(
        client.listAuditEvents({ principal, since: future, until: timestampFromDate(clock.now()) }),
        'invalid_request',
        'since must not be after until',
      );
      // Defence in depth behind the gateway's URL check: PostgreSQL cannot compare text with NUL.
      for (const filter of [{ action: 'a\u0000b' }, { actorId: '\u0000' }, { targetId: 'prj_\u0000' }]) {
        await expectAppError(client.listAuditEvents({ principal, ...filter }), 'invalid_request', /NUL/);
      }
    });

    it('shows a tenant only its own chain; platform admins may name any tenant', async () => {
      const a = await newTenant('iso-a');
      const b = await newTenant('iso-b');
      await client.createProject({ principal: a.principal, name: 'secret-plans', environment: '' });
      const seenByB = await listAll(b.principal);
      expect(seenByB.every((e) => e.tenantId === b.tenantId)).toBe(true);
      expect(seenByB.map((e) => e.detailsJson).join()).not.toContain('secret-plans');
      await expectAppError(
        client.listAuditEvents({ principal: b.principal, tenantId: a.tenantId }),
        'forbidden',
      );
      await expectAppError(
        client.verifyAuditEvents({ principal: b.principal, tenantId: a.tenantId }),
        'forbidden',
      );

      const platform = await principalFor(client, OWNER_EMAIL, OWNER_PASSWORD);
      const seenByPlatform = await listAll(platform, { tenantId: a.tenantId });
      expect(seenByPlatform.map((e) => e.action)).toEqual(['project.create', 'tenant.create']);
      await expect(
        client.verifyAuditEvents({ principal: platform, tenantId: a.tenantId }),
      ).resolves.toMatchObject({
        ok: true,
        eventsChecked: BigInt((await rows(a.tenantId)).length),
      });
    });

    it('lets owners and admins read the trail, not developers or viewers', async () => {
      const owner = await newTenant('roles');
      const member = await newTenant('roles-member');
      await client.addMember({ principal: owner.principal, email: member.email, role: TenantRole.VIEWER });
      const switched = await client.switchTenant({ principal: member.principal, tenantId: owner.tenantId });
      const viewer = {
        ...member.principal,
        tenantId: switched.session?.tenant?.id ?? '',
        role: TenantRole.VIEWER,
      };
      await expectAppError(
        client.listAuditEvents({ principal: viewer }),
        'forbidden',
        'your role (viewer) does not grant permission audit:read',
      );
      await client.changeMemberRole({
        principal: owner.principal,
        userId: member.userId,
        role: TenantRole.ADMIN,
      });
      const events = await listAll({ ...viewer, role: TenantRole.ADMIN });
      expect(events.map((e) => e.action)).toEqual([
        'member.role_change',
        'session.switch_tenant',
        'member.add',
        'tenant.create',
      ]);
      expect(events[0]).toMatchObject({
        actor: { type: 'user', id: owner.userId },
        target: { type: 'user', id: member.userId },
      });
      expect(JSON.parse(events[0]?.detailsJson ?? '')).toEqual({ from: 'viewer', to: 'admin' });
      expect(events[1]).toMatchObject({ actor: { type: 'user', id: member.userId } });
    });
  });
});

describe('the audit retention job on bullmq (real Redis)', () => {
  it('runs audit-prune from admin’s queue: old events go, the chain still verifies', async () => {
    const redis = createTestRedis('audit_prune_job');
    const clock = new ManualClock(Date.parse('2026-11-25T12:00:00Z'));
    const rig = await startAdminRig(
      'audit_prune_job',
      { ADMIN_REDIS_URL: redis.url, ADMIN_REDIS_PREFIX: redis.prefix, RELAYPLANE_AUDIT_RETENTION_DAYS: '1' },
      { clock },
    );
    try {
      const signedUp = await rig.client.signup({
        email: 'job@example.com',
        password: PASSWORD,
        tenantName: 'job',
      });
      const tenantId = signedUp.tenant?.id ?? '';
      const count = async () =>
        (
          await rig.admin.database.db
            .selectFrom('audit_events')
            .select('action')
            .where('chain_key', '=', tenantId)
            .execute()
        ).map((r) => r.action);
      expect(await count()).toContain('tenant.create');
      clock.advance(2 * DAY_MS);
      await rig.admin.scheduler.trigger(AUDIT_PRUNE_JOB);
      const deadline = Date.now() + 10_000;
      while (!(await count()).includes('audit.prune')) {
        if (Date.now() > deadline) throw new Error('the audit-prune job did not run within 10 s');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await count()).toEqual(['audit.prune']);
      const principal = await principalFor(rig.client, 'job@example.com', PASSWORD);
      await expect(rig.client.verifyAuditEvents({ principal })).resolves.toMatchObject({
        ok: true,
        firstBadId: '',
      });
    } finally {
      await rig.close();
      await redis.clean();
    }
  });
});
