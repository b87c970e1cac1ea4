import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { create } from '@bufbuild/protobuf';
import { newId } from '@relayplane/contract/ids';
import { GetUsageRequestSchema } from '@relayplane/proto/billing';
import type { IssuerService as IssuerRpc } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { createDatabase, type Database } from '@relayplane/shared/db';
import type { ServiceClient } from '@relayplane/shared/rpc';
import { BullmqScheduler, MemoryScheduler } from '@relayplane/shared/scheduler';
import { auditChildOutput } from '@relayplane/testing/audit';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { type KyselyPlugin, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The real issuer, started in-process as its own tests do (SummarizeUsage served over gRPC).
import {
  type CredentialRowInit,
  eventually,
  insertCredentials as insertIssuerCredentials,
  newKek,
  type RunningIssuer,
  rejection,
  startIssuer,
} from '../../issuer/tests/support/harness.ts';
import { migrations } from '../src/db/migrations/index.ts';
import type { BillingDatabase } from '../src/db/schema.ts';
import { getUsage } from '../src/grpc/get-usage.ts';
import { USAGE_AGGREGATION_JOB, UsageAggregation } from '../src/jobs/usage-aggregation.ts';
import { type UsageDay, UsageStore } from '../src/stores/usage-daily.ts';

const DAY = '2026-05-20';
const NEXT = '2026-05-21';
/** `hh:mm` on the scripted day (or `dayOffset` days from it), UTC. */
const at = (hhmm: string, dayOffset = 0) =>
  new Date(Date.parse(`${DAY}T${hhmm}:00Z`) + dayOffset * 86_400_000);

const usageDay = (day: string, projectId: string, issued: number, peak: number): UsageDay => ({
  day,
  projectId,
  credentialsIssued: BigInt(issued),
  peakConcurrentConnections: peak,
  // No relay sessions in these scripts (issuer tests cover the session columns' sums).
  sessionsEnded: 0n,
  sessionSeconds: 0,
  bytesSent: 0n,
  bytesReceived: 0n,
});

describe('usage metering (real issuer over gRPC, PostgreSQL, Redis)', () => {
  const logger = testLogger('billing-usage');
  const redis = createTestRedis('billing_usage');
  let database: TestDatabase;
  let issuer: RunningIssuer;
  let billing: Database<BillingDatabase>;
  /** A connection of its own (another application_name) for looking at and killing backends. */
  let admin: Database<unknown>;
  const clock = new ManualClock(at('12:00'));
  const tA = newId('tenant');
  const tB = newId('tenant');
  // Sorted, so the expected rows are in the answer's order ('' first, then by project).
  const [pA1, pA2] = [newId('project'), newId('project')].sort() as [string, string];
  const pB = newId('project');

  /** Every row of the usage table, read with a raw query. */
  const rawRows = async () =>
    (
      await sql<{ tenant_id: string; project_id: string; day: string; issued: string; peak: number }>`
        select tenant_id, project_id, to_char(day, 'YYYY-MM-DD') as day, credentials_issued::text as issued,
          peak_concurrent_connections as peak
        from billing.usage_daily order by tenant_id, day, project_id`.execute(billing.db)
    ).rows;

  const insertCredentials = (rows: CredentialRowInit[]) => insertIssuerCredentials(issuer.service, rows);

  const newUsage = (
    over: { db?: Database<BillingDatabase>['db']; issuer?: ServiceClient<typeof IssuerRpc> } = {},
  ) =>
    new UsageAggregation({
      db: over.db ?? billing.db,
      issuer: over.issuer ?? issuer.client,
      scheduler: new MemoryScheduler(logger),
      clock,
      logger,
    });

  /** GetUsage as the service answers it: the range checked, then the stored days. */
  const query = async (tenantId: string, from: string, to: string) =>
    (
      await getUsage({ usage: new UsageStore(billing.db) })(
        create(GetUsageRequestSchema, { tenantId, from, to }),
        {} as never,
      )
    ).days;

  // Before the extra credential of the fault tests, and after it.
  const FIRST = [usageDay(DAY, '', 3, 3), usageDay(DAY, pA1, 2, 2), usageDay(DAY, pA2, 1, 1)];
  const SECOND = [usageDay(DAY, '', 4, 4), usageDay(DAY, pA1, 3, 3), usageDay(DAY, pA2, 1, 1)];

  beforeAll(async () => {
    database = await createTestDatabase('billing_usage');
    issuer = await startIssuer({ databaseUrl: database.url, clock, kek: newKek() });
    billing = await createDatabase<BillingDatabase>(
      { kind: 'postgres', url: database.url },
      'billing',
      logger,
    );
    await billing.migrate(migrations);
    admin = await createDatabase<unknown>({ kind: 'postgres', url: database.url }, 'tooling', logger);
    await insertCredentials([
      // Tenant A, project 1: across midnight; a start at 01:00 as the first ends (no overlap).
      { tenant: tA, project: pA1, issued: at('23:00', -1), expires: at('01:00') },
      { tenant: tA, project: pA1, issued: at('00:30'), expires: at('02:00') },
      { tenant: tA, project: pA1, issued: at('01:00'), expires: at('03:00') },
      // Tenant A, project 2: with the two above at 00:45, the tenant peaks at 3.
      { tenant: tA, project: pA2, issued: at('00:45'), expires: at('00:50') },
      // Tenant B: revoked before the next one starts; the last runs into the next day.
      { tenant: tB, project: pB, issued: at('12:00'), expires: at('12:00', 1), revoked: at('18:00') },
      { tenant: tB, project: pB, issued: at('23:00'), expires: at('01:00', 1) },
    ]);
  });

  afterAll(async () => {
    await admin?.destroy();
    await billing?.destroy();
    await issuer?.stop();
    await database?.drop();
    await redis.clean();
  });

  it('aggregates a scripted day into exact counts and peaks, read back by query', async () => {
    const usage = newUsage();
    await usage.aggregateDay(DAY);
    await usage.aggregateDay(NEXT);
    expect(await query(tA, DAY, DAY)).toEqual(FIRST);
    expect(await query(tB, DAY, NEXT)).toEqual([
      usageDay(DAY, '', 2, 1),
      usageDay(DAY, pB, 2, 1),
      usageDay(NEXT, '', 0, 1),
      usageDay(NEXT, pB, 0, 1),
    ]);
    expect(await query(tA, NEXT, '2026-06-30')).toEqual([]);
    expect(await query(newId('tenant'), DAY, NEXT)).toEqual([]);
  });

  it('counts a day once however many times it is aggregated, in turn or at once', async () => {
    const one = newUsage();
    const two = newUsage();
    await one.aggregateDay(DAY);
    const before = await rawRows();
    await one.aggregateDay(DAY);
    await Promise.all([one.aggregateDay(DAY), two.aggregateDay(DAY), two.aggregateDay(DAY)]);
    expect(await rawRows()).toEqual(before);
    expect(before.filter((r) => r.day === DAY)).toHaveLength(5);
    expect(await query(tA, DAY, DAY)).toEqual(FIRST);
  });

  it('lets two workers replacing the same day at the same moment take turns', async () => {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const deletes = new Set<string>();
    let deleted = false;
    // Worker one stops inside its transaction, right after deleting the day.
    const pause: KyselyPlugin = {
      transformQuery: (args) => {
        if (args.node.kind === 'DeleteQueryNode') deletes.add(args.queryId.queryId);
        return args.node;
      },
      transformResult: async (args) => {
        if (deletes.has(args.queryId.queryId)) {
          deleted = true;
          await released;
        }
        return args.result;
      },
    };
    const one = newUsage({ db: billing.db.withPlugin(pause) }).aggregateDay(DAY);
    await eventually(async () => (deleted ? true : undefined), "worker one's delete");
    const two = newUsage().aggregateDay(DAY);
    // Worker two waits for worker one's transaction (on a lock), not beside it.
    await eventually(
      async () =>
        (
          await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'`.execute(admin.db)
        ).rows[0]?.n === 1
          ? true
          : undefined,
      'worker two waiting for worker one',
    );
    release();
    await Promise.all([one, two]);
    expect(await query(tA, DAY, DAY)).toEqual(FIRST);
    expect((await rawRows()).filter((r) => r.day === DAY)).toHaveLength(5);
  });

  it('refuses malformed days and ranges', async () => {
    const usage = newUsage();
    const bad = [
      ['nonsense', DAY, DAY],
      [tA, '2026-02-30', DAY],
      [tA, DAY, '2026-5-21'],
      [tA, NEXT, DAY], // from after to
      [tA, '2025-05-19', DAY], // 367 days: 366 (inclusive) is the longest range
    ] as const;
    for (const [tenant, from, to] of bad) {
      expect((await rejection(query(tenant, from, to))).code).toBe('invalid_request');
    }
    expect(await query(tA, '2025-05-20', DAY)).toEqual(FIRST);
    expect((await rejection(usage.aggregateDay('20260520'))).code).toBe('invalid_request');
  });

  describe('a job that dies half-way', () => {
    beforeAll(async () => {
      // The issuer's numbers change after the first complete aggregation.
      await insertCredentials([{ tenant: tA, project: pA1, issued: at('00:40'), expires: at('05:00') }]);
    });

    it('loses and doubles nothing when the replace throws after the delete', async () => {
      const failing: KyselyPlugin = {
        transformQuery: (args) => {
          if (args.node.kind === 'InsertQueryNode') throw new Error('worker died');
          return args.node;
        },
        transformResult: async (args) => args.result,
      };
      await expect(newUsage({ db: billing.db.withPlugin(failing) }).aggregateDay(DAY)).rejects.toThrow(
        'worker died',
      );
      expect(await query(tA, DAY, DAY)).toEqual(FIRST);
      await newUsage().aggregateDay(DAY);
      expect(await query(tA, DAY, DAY)).toEqual(SECOND);
    });

    it('loses and doubles nothing when the server drops the connection mid-transaction', async () => {
      await newUsage().aggregateDay(DAY);
      const before = await rawRows();
      const deletes = new Set<string>();
      const killed: boolean[] = [];
      // After the DELETE, inside the transaction: the server kills that connection.
      const terminate: KyselyPlugin = {
        transformQuery: (args) => {
          if (args.node.kind === 'DeleteQueryNode') deletes.add(args.queryId.queryId);
          return args.node;
        },
        transformResult: async (args) => {
          if (deletes.has(args.queryId.queryId)) {
            const result = await sql<{ killed: boolean }>`select pg_terminate_backend(pid) as killed
              from pg_stat_activity
              where datname = current_database() and pid <> pg_backend_pid()
                and state like 'idle in transaction%' and query like '%delete from "billing"."usage_daily"%'`.execute(
              admin.db,
            );
            killed.push(...result.rows.map((r) => r.killed));
          }
          return args.result;
        },
      };
      await expect(newUsage({ db: billing.db.withPlugin(terminate) }).aggregateDay(DAY)).rejects.toThrow();
      expect(killed).toEqual([true]);
      expect(await rawRows()).toEqual(before);
      await newUsage().aggregateDay(DAY);
      expect(await rawRows()).toEqual(before);
      expect(await query(tA, DAY, DAY)).toEqual(SECOND);
    });

    it('loses and doubles nothing when the worker process is SIGKILLed mid-transaction, and a re-run is exact', async () => {
      // Numbers no aggregation produces: a lost, partial or doubled replace would show.
      await sql`update billing.usage_daily set credentials_issued = 99 where tenant_id = ${tA}`.execute(
        billing.db,
      );
      const before = await rawRows();
      const child = spawn(process.execPath, ['--input-type=module', '-e', WORKER], {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        env: {
          ...process.env,
          USAGE_MODULE: new URL('../src/jobs/usage-aggregation.ts', import.meta.url).href,
          BILLING_DATABASE_URL: database.url,
          ISSUER_ADDRESS: `127.0.0.1:${issuer.service.port}`,
          DAY,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      auditChildOutput(child, 'usage-worker');
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => {
        out += String(d);
      });
      child.stderr.on('data', (d) => {
        err += String(d);
      });
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        child.on('exit', (_code, signal) => resolve(signal)),
      );
      await eventually(
        async () => (out.includes('deleted') ? true : undefined),
        `the worker's delete (${err})`,
      );
      // The worker's transaction has deleted the day and holds it: the row locks are taken.
      const waiting = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
        where datname = current_database() and application_name = 'relayplane-billing'
          and state like 'idle in transaction%'`.execute(admin.db);
      expect(waiting.rows).toEqual([{ n: 1 }]);
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      expect(out).not.toContain('committed');
      // Nothing lost, nothing doubled: the last complete aggregation (however stale) stands.
      expect(await rawRows()).toEqual(before);
      // A re-run (the job's next attempt) yields the exact values.
      await newUsage().aggregateDay(DAY);
      expect(await query(tA, DAY, DAY)).toEqual(SECOND);
    });
  });

  describe('the scheduled job (bullmq, real Redis)', () => {
    const connections: Redis[] = [];
    const schedulers: BullmqScheduler[] = [];
    const usages: UsageAggregation[] = [];

    afterAll(async () => {
      for (const usage of usages) await usage.stop();
      for (const scheduler of schedulers) await scheduler.close();
      for (const connection of connections) connection.disconnect();
    });

    it('fills yesterday and today on two workers and counts each day once', async () => {
      await sql`delete from billing.usage_daily`.execute(billing.db);
      // "Today" is the day after the scripted day: the job covers both.
      const jobClock = new ManualClock(at('00:30', 1));
      let calls = 0;
      const counting = new Proxy(issuer.client, {
        get(target, prop, receiver) {
          if (prop === 'summarizeUsage') {
            return (...args: Parameters<typeof target.summarizeUsage>) => {
              calls++;
              return target.summarizeUsage(...args);
            };
          }
          return Reflect.get(target, prop, receiver);
        },
      });
      // Two workers, as two billing replicas: one queue, one job schedule, each with its Usage.
      for (let i = 0; i < 2; i++) {
        const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
        connections.push(connection);
        const scheduler = new BullmqScheduler('billing-usage', connection, `${redis.prefix}bull`, logger);
        schedulers.push(scheduler);
        const usage = new UsageAggregation({
          db: billing.db,
          issuer: counting,
          scheduler,
          clock: jobClock,
          logger,
          intervalMs: 200,
        });
        usages.push(usage);
        await usage.start();
        await scheduler.start();
      }
      // The schedule alone (no direct call) fills the table, then runs again and again.
      await eventually(async () => (calls >= 8 ? true : undefined), 'four runs of the usage job');
      await Promise.all(schedulers.map((s) => s.trigger(USAGE_AGGREGATION_JOB)));
      await eventually(async () => (calls >= 12 ? true : undefined), 'the triggered runs');
      for (const usage of usages.splice(0)) await usage.stop();
      for (const scheduler of schedulers.splice(0)) await scheduler.close();
      expect(await query(tA, DAY, NEXT)).toEqual(SECOND);
      expect(await query(tB, DAY, NEXT)).toEqual([
        usageDay(DAY, '', 2, 1),
        usageDay(DAY, pB, 2, 1),
        usageDay(NEXT, '', 0, 1),
        usageDay(NEXT, pB, 0, 1),
      ]);
      expect(await rawRows()).toHaveLength(7);
    });
  });
});

/** A usage worker in its own process: stops for good right after its DELETE, inside the transaction. */
const WORKER = `
import { IssuerService } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { createDatabase } from '@relayplane/shared/db';
import { createLogger } from '@relayplane/shared/logger';
import { connect } from '@relayplane/shared/rpc';
import { MemoryScheduler } from '@relayplane/shared/scheduler';
const { UsageAggregation } = await import(process.env.USAGE_MODULE);
const logger = createLogger({ level: 'silent', service: 'usage-worker' });
const database = await createDatabase({ kind: 'postgres', url: process.env.BILLING_DATABASE_URL }, 'billing', logger);
const deletes = new Set();
const pauseAfterDelete = {
  transformQuery(args) {
    if (args.node.kind === 'DeleteQueryNode') deletes.add(args.queryId.queryId);
    return args.node;
  },
  async transformResult(args) {
    if (deletes.has(args.queryId.queryId)) {
      process.stdout.write('deleted\\n');
      await new Promise(() => {});
    }
    return args.result;
  },
};
const usage = new UsageAggregation({
  db: database.db.withPlugin(pauseAfterDelete),
  issuer: connect(IssuerService, process.env.ISSUER_ADDRESS, { retries: false }),
  scheduler: new MemoryScheduler(logger),
  clock: new ManualClock(),
  logger,
});
await usage.aggregateDay(process.env.DAY);
process.stdout.write('committed\\n');
process.exit(0);
`;
