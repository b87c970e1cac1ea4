/**
 * Usage metering: credentials issued and peak concurrent connections per tenant (and per
 * project) per UTC day.
 *
 * The issuer owns the data (its credentials table); `SummarizeUsage` recomputes one day from
 * it and is a pure read. The aggregation job asks for a day and REPLACES that day's rows in
 * one transaction (delete + insert, never increment), under a per-day advisory lock. So a job
 * that runs twice, runs on two workers at once, or dies half-way and is run again, leaves
 * exactly one copy of the numbers: the last complete computation.
 */
import type { IssuerService } from '@relayplane/proto/issuer';
import type { Clock } from '@relayplane/shared/clock';
import { AppError } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { Logger } from '@relayplane/shared/logger';
import type { ServiceClient } from '@relayplane/shared/rpc';
import type { Scheduler } from '@relayplane/shared/scheduler';
import { type Kysely, sql } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';
import type { UsageDatabase } from './schema.ts';

/** Scheduler job (bullmq job scheduler id in distributed mode) aggregating yesterday and today. */
export const USAGE_AGGREGATION_JOB = 'billing-usage-aggregation';
export const DEFAULT_USAGE_INTERVAL_MS = 5 * 60_000;
/** Longest range `query` answers, in days (inclusive of both ends: a leap year). */
export const MAX_USAGE_QUERY_DAYS = 366;

const DAY_MS = 86_400_000;
const DAY_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;
// Transaction-scoped advisory lock per day: two workers replacing the same day take turns.
const USAGE_LOCK = sql`hashtext('relayplane.billing.usage-daily')`;

export interface UsageDay {
  /** YYYY-MM-DD (UTC). */
  day: string;
  /** Empty: the whole tenant. */
  projectId: string;
  credentialsIssued: bigint;
  peakConcurrentConnections: number;
}

export interface UsageSummary {
  /** Empty: the whole tenant (its own peak, not the sum of its projects' peaks). */
  projectId: string;
  credentialsIssued: bigint;
  peakConcurrentConnections: number;
}

/**
 * Metered usage reporting (Stripe, where the plan has overage pricing: `StripeMeterReporter`
 * in stripe-meter.ts, wired by the service with the Stripe provider) plugs in here: called
 * after a day's rows are committed, once per tenant, with that tenant's rows (the total first).
 * It runs on every aggregation of the day, so it must be idempotent per (tenant, day) and
 * report the absolute value, never an increment. Failures are logged; the next run reports again.
 * Nothing is reported unless a `report` is given.
 */
export type UsageReporter = (tenantId: string, day: string, summary: UsageSummary[]) => Promise<void>;

export interface UsageDeps {
  db: Kysely<BillingDatabase>;
  issuer: ServiceClient<typeof IssuerService>;
  scheduler: Scheduler;
  clock: Clock;
  logger: Logger;
  /** How often the job aggregates yesterday and today (default 5 minutes). */
  intervalMs?: number;
  /** Metered usage reporting hook (see `UsageReporter`); none by default. */
  report?: UsageReporter;
}

/** Start of the UTC day `day`; undefined unless `day` is a calendar day as YYYY-MM-DD. */
export function parseDay(day: string): Date | undefined {
  const m = DAY_PATTERN.exec(day);
  if (!m) return undefined;
  const start = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return formatDay(start) === day ? start : undefined;
}

export function formatDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

function requireDay(name: string, day: string): Date {
  const start = parseDay(day);
  if (!start) throw new AppError('invalid_request', `${name} must be a calendar day as YYYY-MM-DD`);
  return start;
}

export class Usage {
  readonly #db: Kysely<BillingDatabase & UsageDatabase>;
  readonly #issuer: ServiceClient<typeof IssuerService>;
  readonly #scheduler: Scheduler;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #report: UsageReporter | undefined;
  readonly #running = new Set<Promise<void>>();
  #stopped = false;

  constructor(deps: UsageDeps) {
    this.#db = deps.db.withTables<UsageDatabase>();
    this.#issuer = deps.issuer;
    this.#scheduler = deps.scheduler;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.#intervalMs = deps.intervalMs ?? DEFAULT_USAGE_INTERVAL_MS;
    this.#report = deps.report;
  }

  /** Registers the aggregation job; the owner of the scheduler starts (and closes) it. */
  async start(): Promise<void> {
    this.#stopped = false;
    this.#scheduler.every(USAGE_AGGREGATION_JOB, this.#intervalMs, () => this.#track(this.aggregateRecent()));
  }

  /** Stops taking jobs and waits for the aggregation in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.allSettled([...this.#running]);
  }

  /**
   * One job run: yesterday (settles once the day is over; late revocations change its peak)
   * and today, UTC by the clock. Both are attempted; the run fails if either failed.
   */
  async aggregateRecent(): Promise<void> {
    if (this.#stopped) return;
    const today = new Date(Math.floor(this.#clock.now().getTime() / DAY_MS) * DAY_MS);
    const days = [formatDay(new Date(today.getTime() - DAY_MS)), formatDay(today)];
    const results = await Promise.allSettled(days.map((day) => this.aggregateDay(day)));
    const failed = results.filter((r) => r.status === 'rejected');
    if (failed.length) throw (failed[0] as PromiseRejectedResult).reason;
  }

  /** One aggregation: recompute `day` from the issuer and replace its rows (exported for tests and the job). */
  async aggregateDay(day: string): Promise<void> {
    requireDay('day', day);
    // Taken before asking the issuer: the rows hold at least everything up to this instant, so
    // a day whose rows were computed at or after its end holds its final counts.
    const computedAt = this.#clock.now();
    const { summaries } = await this.#issuer.summarizeUsage({ day });
    const rows = summaries.map((s) => ({
      tenant_id: s.tenantId,
      project_id: s.projectId,
      day,
      credentials_issued: s.credentialsIssued.toString(),
      peak_concurrent_connections: s.peakConcurrentConnections,
      computed_at: computedAt,
    }));
    await this.#db.transaction().execute(async (tx) => {
      await sql`select pg_advisory_xact_lock(${USAGE_LOCK}, hashtext(${day}))`.execute(tx);
      await tx.deleteFrom('usage_daily').where('day', '=', day).execute();
      // Bounded by tenants × projects active that day; chunked to stay under the bind limit.
      for (let i = 0; i < rows.length; i += 5_000) {
        await tx
          .insertInto('usage_daily')
          .values(rows.slice(i, i + 5_000))
          .execute();
      }
    });
    this.#logger.debug({ day, rows: rows.length }, 'usage day aggregated');
    if (this.#report) await this.#reportDay(day, summaries);
  }

  /** Stored usage of `tenantId` for the inclusive UTC days [from, to], by day then project ('' first). */
  async query(tenantId: string, from: string, to: string): Promise<UsageDay[]> {
    if (!isId('tenant', tenantId)) throw new AppError('invalid_request', 'tenant_id is not a tenant id');
    const start = requireDay('from', from);
    const end = requireDay('to', to);
    if (end < start) throw new AppError('invalid_request', 'from must not be after to');
    if ((end.getTime() - start.getTime()) / DAY_MS + 1 > MAX_USAGE_QUERY_DAYS) {
      throw new AppError('invalid_request', `a usage range spans at most ${MAX_USAGE_QUERY_DAYS} days`);
    }
    const rows = await this.#db
      .selectFrom('usage_daily')
      .select([
        sql<string>`to_char(day, 'YYYY-MM-DD')`.as('day'),
        'project_id',
        'credentials_issued',
        'peak_concurrent_connections',
      ])
      .where('tenant_id', '=', tenantId)
      .where('day', '>=', from)
      .where('day', '<=', to)
      .orderBy('usage_daily.day')
      .orderBy('project_id')
      .execute();
    return rows.map((r) => ({
      day: r.day,
      projectId: r.project_id,
      credentialsIssued: BigInt(r.credentials_issued),
      peakConcurrentConnections: Number(r.peak_concurrent_connections),
    }));
  }

  async #reportDay(
    day: string,
    summaries: {
      tenantId: string;
      projectId: string;
      credentialsIssued: bigint;
      peakConcurrentConnections: number;
    }[],
  ): Promise<void> {
    const byTenant = new Map<string, UsageSummary[]>();
    for (const s of summaries) {
      const list = byTenant.get(s.tenantId) ?? [];
      list.push({
        projectId: s.projectId,
        credentialsIssued: s.credentialsIssued,
        peakConcurrentConnections: s.peakConcurrentConnections,
      });
      byTenant.set(s.tenantId, list);
    }
    for (const [tenantId, list] of byTenant) {
      try {
        await this.#report?.(tenantId, day, list);
      } catch (err) {
        this.#logger.warn(
          { err, tenantId, day },
          'could not report metered usage; the next aggregation retries',
        );
      }
    }
  }

  #track(run: Promise<void>): Promise<void> {
    this.#running.add(run);
    return run.finally(() => this.#running.delete(run));
  }
}
