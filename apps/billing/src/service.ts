import type { AuditOutbox } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Database } from '@relayplane/shared/db';
import type { Logger } from '@relayplane/shared/logger';
import type { Registry } from '@relayplane/shared/metrics';
import type { RateLimiter } from '@relayplane/shared/rate-limit';
import { waitReady } from '@relayplane/shared/redis';
import type { RpcServer } from '@relayplane/shared/rpc';
import type { Scheduler } from '@relayplane/shared/scheduler';
import type { BillingConfig } from './config.ts';
import { BillingContext, type BillingOverrides } from './context.ts';
import { migrations } from './db/migrations/index.ts';
import type { BillingDatabase } from './db/schema.ts';
import type { UsageAggregation } from './jobs/usage-aggregation.ts';
import type { BillingProvider } from './providers/provider.ts';

export type { BillingOverrides } from './context.ts';

/** How long start() waits for the throttle's Redis; past it, the per-process limit answers until Redis does. */
const THROTTLE_READY_WAIT_MS = 1_000;

/** The billing service (plans, prices, subscriptions, entitlements, checkout, usage): its context, started and stopped. */
export class BillingService {
  readonly ctx: BillingContext;
  readonly config: BillingConfig;
  readonly logger: Logger;
  readonly database: Database<BillingDatabase>;
  readonly rpc: RpcServer;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics: Registry;
  readonly bus: Bus;
  readonly scheduler: Scheduler;
  readonly usage: UsageAggregation;
  readonly provider: BillingProvider;
  /** Per-tenant checkout throttle (Redis with a per-process fallback, or memory alone). */
  readonly checkoutThrottle: RateLimiter;
  /** Audit events of this service's changes, delivered to admin (docs/audit.md). */
  readonly audit: AuditOutbox;

  private constructor(ctx: BillingContext) {
    this.ctx = ctx;
    ({
      config: this.config,
      logger: this.logger,
      database: this.database,
      rpc: this.rpc,
      metrics: this.metrics,
      bus: this.bus,
      scheduler: this.scheduler,
      usage: this.usage,
      provider: this.provider,
      checkoutThrottle: this.checkoutThrottle,
      audit: this.audit,
    } = ctx);
  }

  static async create(config: BillingConfig, overrides: BillingOverrides = {}): Promise<BillingService> {
    return new BillingService(await BillingContext.fromConfig(config, overrides));
  }

  /**
   * Listens at once (alive, not ready: see serving.ts), applies the migrations (safe with
   * concurrent replicas; retried until PostgreSQL answers), schedules usage aggregation (which
   * begins once Redis answers). Resolves once ready.
   */
  async start(): Promise<void> {
    const { serving, redis } = this.ctx;
    await serving.listen();
    await serving.step('migrations', async () => {
      const applied = await this.database.migrate(migrations);
      if (applied.length) this.logger.info({ applied }, 'migrations applied');
    });
    // Delivers what earlier runs left, and from now on what this one writes (admin may be away).
    this.audit.start();
    await this.usage.start();
    await this.scheduler.start();
    if (redis && !(await waitReady(redis.throttle, THROTTLE_READY_WAIT_MS))) {
      this.logger.warn('redis is not reachable yet: the checkout throttle is per process until it is');
    }
    await serving.ready({ provider: this.provider.name });
  }

  get port(): number {
    return this.rpc.port;
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.ctx.serving.metricsPort;
  }

  /** Closes the context, the last built first. Also ends a start() still waiting for its dependencies. */
  destroy(): Promise<void> {
    return this.ctx.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}
