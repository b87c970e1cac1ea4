import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { testLogger } from '@relayplane/testing/logger';
import { hasMetric, sampleValue } from '@relayplane/testing/metrics';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IssuerConfigOverrides } from '../src/config.ts';
import { CREDENTIAL_RETENTION_JOB, CredentialRetention } from '../src/issuance/credential-retention.ts';
import { CredentialStore } from '../src/issuance/credential-store.ts';
import { redisKeys } from '../src/redis/keys.ts';
import { RevocationStore } from '../src/revocation/revocation-store.ts';
import { MAINTENANCE_QUEUE } from '../src/service.ts';
import {
  type CredentialRowInit,
  eventually,
  insertCredentials,
  issueRequest,
  newKek,
  type RunningIssuer,
  startIssuer,
} from './support/harness.ts';

const RELAYS: IssuerConfigOverrides = {
  relays: {
    staticRelays: [{ id: 'rly_static_eu-west_1', region: 'eu-west', host: 'relay-eu.example', port: 4433 }],
    fallback: [],
  },
};

const NOW = '2026-03-20T12:00:00Z';
/** With a 3-day window at NOW: credentials that expired before 2026-03-17T12:00Z go. */
const RETENTION_DAYS = '3';
const CUTOFF = '2026-03-17T12:00:00.000Z';

interface Row {
  jti: string;
  tenant_id: string;
  expires_at: Date;
}

describe('credential retention (controlled clock, PostgreSQL)', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;
  const clock = new ManualClock(Date.parse(NOW));

  const rows = async (tenantId: string) =>
    (
      await sql<Row>`select jti, tenant_id, expires_at from issuer.credentials
        where tenant_id = ${tenantId} order by expires_at, jti`.execute(issuer.service.database.db)
    ).rows;
  const feedRows = async () =>
    (
      await sql<{ jti: string; sequence: string }>`select jti, sequence from issuer.revocations
        order by sequence`.execute(issuer.service.database.db)
    ).rows;
  /** Inserts rows of one tenant and returns their jtis, in the order given. */
  const insert = async (tenantId: string, init: Omit<CredentialRowInit, 'tenant'>[]) => {
    await insertCredentials(
      issuer.service,
      init.map((r) => ({ ...r, tenant: tenantId })),
    );
    const written = await rows(tenantId);
    return init.map(
      (r) => written.find((w) => w.expires_at.getTime() === new Date(r.expires).getTime())?.jti ?? '',
    );
  };
  /** `relayplane_issuer_credentials_deleted_total` of the running issuer. */
  const deletedTotal = async () => {
    const text = await issuer.service.metrics.metrics();
    expect(hasMetric(text, 'relayplane_issuer_credentials_deleted_total', 'counter')).toBe(true);
    return sampleValue(text, 'relayplane_issuer_credentials_deleted_total');
  };
  const store = () => new CredentialStore(issuer.service.database.db, issuer.service.database.schema);
  const revocations = () => new RevocationStore(issuer.service.database.db, issuer.service.database.schema);
  const summarize = async (day: string) =>
    (await issuer.client.summarizeUsage({ day })).summaries.map((s) => ({
      tenantId: s.tenantId,
      projectId: s.projectId,
      credentialsIssued: s.credentialsIssued,
      peak: s.peakConcurrentConnections,
    }));

  beforeAll(async () => {
    database = await createTestDatabase('issuer_retention');
    issuer = await startIssuer({
      databaseUrl: database.url,
      clock,
      kek: newKek(),
      config: RELAYS,
      env: { ISSUER_CREDENTIAL_RETENTION_DAYS: RETENTION_DAYS },
    });
  });

  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
  });

  it('deletes credentials expired longer than the window with their feed entries; keeps newer ones, usage of the days billing still reads, and the feed of live credentials', async () => {
    clock.set(new Date(NOW));
    const tenantId = newId('tenant');
    const projectId = newId('project');
    const apiKeyId = newId('apiKey');
    const [oldest, justBefore, atCutoff, recent, oldRevoked, recentRevoked] = await insert(tenantId, [
      { project: projectId, issued: '2026-03-10T09:00:00Z', expires: '2026-03-10T10:00:00Z' },
      { project: projectId, issued: '2026-03-17T11:00:00Z', expires: '2026-03-17T11:59:59.999Z' },
      { project: projectId, issued: '2026-03-17T11:00:00Z', expires: CUTOFF }, // not before the cutoff
      { project: projectId, issued: '2026-03-18T23:30:00Z', expires: '2026-03-19T00:30:00Z' },
      { project: projectId, issued: '2026-03-12T09:00:00Z', expires: '2026-03-12T10:00:00Z' },
      { project: projectId, issued: '2026-03-19T09:00:00Z', expires: '2026-03-19T10:00:00Z' },
    ]);
    // Revocations of the past, each with its feed entry (written at the instant it happened).
    await revocations().revoke(tenantId, oldRevoked ?? '', new Date('2026-03-12T09:30:00Z'));
    await revocations().revoke(tenantId, recentRevoked ?? '', new Date('2026-03-19T09:30:00Z'));
    // Live credentials through the real issuance path; one of them revoked now.
    const request = issueRequest({ tenantId, projectId, apiKeyId });
    const live = await issuer.client.issueCredential(request);
    const liveRevoked = await issuer.client.issueCredential(request);
    await issuer.client.revokeCredential({ tenantId, jti: liveRevoked.jti });

    const days = ['2026-03-17', '2026-03-18', '2026-03-19', '2026-03-20'];
    const usageBefore = await Promise.all(days.map(summarize));
    const feedBefore = await issuer.client.listRevocations({ cursor: 0n, limit: 1000 });
    const oldRevokedEntry = feedBefore.revocations.find((r) => r.jti === oldRevoked);
    expect(oldRevokedEntry).toBeDefined();
    const sequences = new Map(feedBefore.revocations.map((r) => [r.jti, r.sequence]));
    expect((await rows(tenantId)).map((r) => r.jti).sort()).toEqual(
      [oldest, justBefore, atCutoff, recent, oldRevoked, recentRevoked, live.jti, liveRevoked.jti].sort(),
    );

    const deletedBefore = await deletedTotal();
    const run = await issuer.service.retention.run();

    expect(run).toMatchObject({ credentials: 3, revocations: 1, complete: true });
    expect((await deletedTotal()) - deletedBefore).toBe(3);
    expect(run.cutoff.toISOString()).toBe(CUTOFF);
    const kept = await rows(tenantId);
    expect(kept.map((r) => r.jti).sort()).toEqual(
      [atCutoff, recent, recentRevoked, live.jti, liveRevoked.jti].sort(),
    );
    expect(kept.every((r) => r.expires_at >= new Date(CUTOFF))).toBe(true);
    const feed = await feedRows();
    expect(feed.map((r) => r.jti)).not.toContain(oldRevoked);

    // Usage: the days billing still recomputes (yesterday, today) and every day whose rows all
    // stayed answer exactly as before; 2026-03-17 lost a row, and billing settled it on the 18th.
    const usageAfter = await Promise.all(days.map(summarize));
    expect(usageAfter.slice(1)).toEqual(usageBefore.slice(1));
    expect(usageAfter[0]).not.toEqual(usageBefore[0]);

    // The feed: the live credentials' entries at the same positions, the cursor where it was.
    const feedAfter = await issuer.client.listRevocations({ cursor: 0n, limit: 1000 });
    expect(feedAfter.revocations.map((r) => r.jti)).toEqual(
      feedBefore.revocations.filter((r) => r.jti !== oldRevoked).map((r) => r.jti),
    );
    for (const entry of feedAfter.revocations) expect(entry.sequence).toBe(sequences.get(entry.jti));
    expect(feedAfter.revocations.map((r) => r.jti)).toEqual(
      expect.arrayContaining([recentRevoked, liveRevoked.jti]),
    );
    expect(feedAfter.nextCursor).toBe(feedBefore.nextCursor);
    // A relay whose cursor is before the deleted entry resumes without it.
    const resumed = await issuer.client.listRevocations({
      cursor: (oldRevokedEntry?.sequence ?? 1n) - 1n,
      limit: 1000,
    });
    expect(resumed.revocations.map((r) => r.jti)).not.toContain(oldRevoked);
    expect(resumed.revocations.map((r) => r.jti)).toContain(liveRevoked.jti);
    expect(feedAfter.revocations.find((r) => r.jti === liveRevoked.jti)?.expiresAt).toEqual(
      liveRevoked.expiresAt,
    );

    // Introspection and assignment answer for live credentials as before.
    expect((await issuer.client.introspectCredential({ token: live.token })).active).toBe(true);
    expect((await issuer.client.introspectCredential({ token: liveRevoked.token })).active).toBe(false);
    const assigned = await issuer.client.assignRelays({ token: live.token, region: '' });
    expect(assigned.relays.map((r) => r.id)).toEqual(['rly_static_eu-west_1']);

    // Nothing more to delete at the same instant; later, the next rows go as their time comes.
    expect(await issuer.service.retention.run()).toMatchObject({ credentials: 0, complete: true });
    clock.set(new Date('2026-03-22T01:00:00Z')); // cutoff 2026-03-19T01:00Z
    expect(await issuer.service.retention.run()).toMatchObject({ credentials: 2, revocations: 0 });
    expect((await deletedTotal()) - deletedBefore).toBe(5);
    expect((await rows(tenantId)).map((r) => r.jti).sort()).toEqual(
      [recentRevoked, live.jti, liveRevoked.jti].sort(),
    );
    clock.set(new Date(NOW));
  });

  it('never deletes what billing still recomputes (yesterday and today), whatever the window', async () => {
    clock.set(new Date(NOW));
    const tenantId = newId('tenant');
    const projectId = newId('project');
    const [dayBefore, yesterday] = await insert(tenantId, [
      { project: projectId, issued: '2026-03-18T22:00:00Z', expires: '2026-03-18T23:59:59Z' },
      { project: projectId, issued: '2026-03-19T00:00:00Z', expires: '2026-03-19T00:00:01Z' },
    ]);
    const zeroWindow = new CredentialRetention({
      store: store(),
      clock,
      logger: testLogger('issuer-retention'),
      retentionDays: 0,
    });
    const yesterdayUsage = await summarize('2026-03-19');
    const run = await zeroWindow.run();
    expect(run.cutoff.toISOString()).toBe('2026-03-19T00:00:00.000Z');
    expect((await rows(tenantId)).map((r) => r.jti)).toEqual([yesterday]);
    expect(dayBefore).not.toBe(yesterday);
    expect(await summarize('2026-03-19')).toEqual(yesterdayUsage);
  });

  it('deletes in batches, and two runs at once (two replicas) delete each row once', async () => {
    clock.set(new Date(NOW));
    const tenantId = newId('tenant');
    const projectId = newId('project');
    const old = Array.from({ length: 40 }, (_, i) => ({
      project: projectId,
      issued: new Date(Date.parse('2026-03-01T00:00:00Z') + i * 60_000),
      expires: new Date(Date.parse('2026-03-01T01:00:00Z') + i * 60_000),
    }));
    const jtis = await insert(tenantId, [
      ...old,
      { project: projectId, issued: '2026-03-19T09:00:00Z', expires: '2026-03-19T10:00:00Z' },
    ]);
    for (const jti of jtis.slice(0, 10))
      await revocations().revoke(tenantId, jti, new Date('2026-03-01T00:30:00Z'));
    const replica = () =>
      new CredentialRetention({
        store: store(),
        clock,
        logger: testLogger('issuer-retention'),
        retentionDays: 3,
        batchSize: 3,
      });
    const runs = await Promise.all([replica().run(), replica().run()]);
    expect(runs.reduce((n, r) => n + r.credentials, 0)).toBe(40);
    expect(runs.reduce((n, r) => n + r.revocations, 0)).toBe(10);
    expect(runs.reduce((n, r) => n + r.batches, 0)).toBeGreaterThanOrEqual(14);
    expect((await rows(tenantId)).map((r) => r.jti)).toEqual([jtis[40]]);
  });

  it('runs as a maintenance job of the issuer (the scheduler registers it)', async () => {
    clock.set(new Date(NOW));
    const tenantId = newId('tenant');
    const [gone, stays] = await insert(tenantId, [
      { project: newId('project'), issued: '2026-03-01T00:00:00Z', expires: '2026-03-01T01:00:00Z' },
      { project: newId('project'), issued: '2026-03-20T11:00:00Z', expires: '2026-03-20T13:00:00Z' },
    ]);
    await issuer.service.scheduler.trigger(CREDENTIAL_RETENTION_JOB);
    await eventually(
      async () => ((await rows(tenantId)).some((r) => r.jti === gone) ? undefined : true),
      'the triggered retention run',
    );
    expect((await rows(tenantId)).map((r) => r.jti)).toEqual([stays]);
  });
});

describe('credential retention across replicas (bullmq)', () => {
  const redis = createTestRedis('issuer_retention');
  let database: TestDatabase;
  const replicas: RunningIssuer[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('issuer_retention_replicas');
    const kek = newKek();
    const clock = new ManualClock(Date.parse(NOW));
    for (let i = 0; i < 2; i++) {
      replicas.push(await startIssuer({ databaseUrl: database.url, clock, kek, redis, config: RELAYS }));
    }
  });

  afterAll(async () => {
    for (const replica of replicas) await replica.stop();
    await database?.drop();
    await redis.clean();
  });

  it('has one schedule for the job, whatever the number of replicas (each occurrence runs once)', async () => {
    const admin = new Redis(redis.url);
    // bullmq's job schedulers of the queue: a sorted set of their ids, and a hash per id.
    const base = `${redisKeys(redis.prefix).bull}:${MAINTENANCE_QUEUE}:repeat`;
    try {
      const ids = await eventually(async () => {
        const all = await admin.zrange(base, '0', '-1');
        return all.includes(CREDENTIAL_RETENTION_JOB) ? all : undefined;
      }, 'the retention schedule');
      expect(ids.filter((id) => id === CREDENTIAL_RETENTION_JOB)).toHaveLength(1);
      expect(await admin.hget(`${base}:${CREDENTIAL_RETENTION_JOB}`, 'every')).toBe('60000');
    } finally {
      admin.disconnect();
    }
  });
});
