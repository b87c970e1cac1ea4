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
import type { Logger } from '@relayplane/shared/logger';
import type { ServiceClient } from '@relayplane/shared/rpc';
import type { Scheduler } from '@relayplane/shared/scheduler';
import { DAY_MS, formatDay } from '@relayplane/shared/usage-day';
import type { Kysely } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';
import { requireDay } from '../domain/usage-days.ts';
import { UsageStore } from '../stores/usage-daily.ts';

/** Scheduler job (bullmq job scheduler id in distributed mode) aggregating yesterday and today. */
export const USAGE_AGGREGATION_JOB = 'billing-usage-aggregation';
export const DEFAULT_USAGE_INTERVAL_MS = 5 * 60_000;

/**
 * Metered usage reporting (Stripe, where the plan has overage pricing: `StripeMeterReporter`
 * in providers/stripe-meter.ts, wired by the service with the Stripe provider) plugs in here:
 * called after a day's rows are committed, once per tenant that has rows that day. It runs on
 * every aggregation of the day, so it must be idempotent per (tenant, day) and report the
 * absolute value, never an increment. Failures are logged; the next run reports again.
 * Nothing is reported unless a `report` is given.
 */
export type UsageReporter = (tenantId: string) => Promise<void>;

export interface UsageAggregationDeps {
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

export class UsageAggregation {
  readonly #store: UsageStore;
  readonly #issuer: ServiceClient<typeof IssuerService>;
  readonly #scheduler: Scheduler;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #report: UsageReporter | undefined;
  readonly #running = new Set<Promise<void>>();
  #stopped = false;

  constructor(deps: UsageAggregationDeps) {
    this.#store = new UsageStore(deps.db);
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

  /** One aggregation: recompute `day` from the issuer and replace its rows. */
  async aggregateDay(day: string): Promise<void> {
    requireDay('day', day);
    // Taken before asking the issuer: the rows hold at least everything up to this instant, so
    // a day whose rows were computed at or after its end holds its final counts.
    const computedAt = this.#clock.now();
    const { summaries } = await this.#issuer.summarizeUsage({ day });
    await this.#store.replaceDay(day, summaries, computedAt);
    this.#logger.debug({ day, rows: summaries.length }, 'usage day aggregated');
    if (this.#report) await this.#reportTenants(day, new Set(summaries.map((s) => s.tenantId)), this.#report);
  }

  async #reportTenants(day: string, tenants: ReadonlySet<string>, report: UsageReporter): Promise<void> {
    for (const tenantId of tenants) {
      try {
        await report(tenantId);
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
