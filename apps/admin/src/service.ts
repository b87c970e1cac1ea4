import { waitReady } from '@relayplane/shared/redis';
import { AUDIT_CHECKPOINT_JOB } from './audit/checkpoints.ts';
import type { AdminConfig } from './config.ts';
import { AdminContext, type AdminOverrides } from './context.ts';
import { migrations } from './db/migrations/index.ts';
import { bootstrapOwner } from './jobs/bootstrap-owner.ts';
import { AUDIT_PRUNE_INTERVAL_MS, AUDIT_PRUNE_JOB, pruneAuditEvents } from './jobs/prune-audit.ts';
import { WEBHOOK_RESEAL_JOB } from './webhooks/reseal.ts';

/** The hourly job that deletes webhook deliveries past their retention. */
export const WEBHOOK_PRUNE_JOB = 'webhook-prune';

export type { AdminOverrides } from './context.ts';

/** How long start() waits for the throttle's Redis; past it, login uses the in-memory limits until Redis answers. */
const THROTTLE_READY_WAIT_MS = 1_000;

/** The admin service (tenants, users, sessions, projects, API keys, bots, IP allowlists): its context, started and stopped. */
export class AdminService {
  readonly ctx: AdminContext;
  #bootstrapped = false;

  private constructor(ctx: AdminContext) {
    this.ctx = ctx;
  }

  static async create(config: AdminConfig, overrides: AdminOverrides = {}): Promise<AdminService> {
    return new AdminService(await AdminContext.fromConfig(config, overrides));
  }

  get config() {
    return this.ctx.config;
  }
  get logger() {
    return this.ctx.logger;
  }
  get database() {
    return this.ctx.database;
  }
  get rpc() {
    return this.ctx.rpc;
  }
  get metrics() {
    return this.ctx.metrics;
  }
  get accounts() {
    return this.ctx.accounts;
  }
  get sessions() {
    return this.ctx.sessions;
  }
  get apiKeys() {
    return this.ctx.apiKeys;
  }
  get audit() {
    return this.ctx.audit;
  }
  get checkpoints() {
    return this.ctx.checkpoints;
  }
  get bus() {
    return this.ctx.bus;
  }
  get loginThrottle() {
    return this.ctx.loginThrottle;
  }
  get totpResealer() {
    return this.ctx.totpResealer;
  }
  /** Admin's maintenance jobs (`audit-prune`, `audit-checkpoint`): bullmq with Redis, timers without. */
  get scheduler() {
    return this.ctx.scheduler;
  }

  /**
   * Listens at once (alive, not ready: see serving.ts), then, each retried until it succeeds
   * (PostgreSQL or billing may start later): applies the migrations (safe with concurrent
   * replicas) and creates the bootstrap owner if due. Resolves once ready.
   */
  async start(): Promise<void> {
    const { serving, config, clock, scheduler } = this.ctx;
    await serving.listen();
    await serving.step('migrations', async () => {
      const applied = await this.database.migrate(migrations);
      if (applied.length) this.logger.info({ applied }, 'migrations applied');
    });
    const bootstrap = config.bootstrap;
    if (bootstrap) {
      const outcome = await serving.step('bootstrap owner', () =>
        bootstrapOwner(bootstrap, {
          accounts: this.accounts,
          audit: this.audit,
          passwords: this.ctx.passwords,
          billing: this.ctx.billing,
          clock,
          logger: this.logger,
          signal: serving.signal,
        }),
      );
      this.#bootstrapped = outcome === 'created';
    }
    if (this.ctx.throttleRedis) await waitReady(this.ctx.throttleRedis, THROTTLE_READY_WAIT_MS);
    scheduler.every(AUDIT_CHECKPOINT_JOB, config.auditCheckpointSeconds * 1000, async () => {
      await this.checkpoints.checkpointAll(clock.now());
    });
    scheduler.every(AUDIT_PRUNE_JOB, AUDIT_PRUNE_INTERVAL_MS, async () => {
      await this.pruneAuditEvents();
    });
    scheduler.every(WEBHOOK_PRUNE_JOB, AUDIT_PRUNE_INTERVAL_MS, async () => {
      await this.pruneWebhookDeliveries();
    });
    // After a KEK rotation: signing secrets sealed by the previous KEK, sealed again (hourly, once across replicas).
    scheduler.every(WEBHOOK_RESEAL_JOB, AUDIT_PRUNE_INTERVAL_MS, async () => {
      await this.ctx.webhooks.resealSecrets();
    });
    await scheduler.start();
    this.ctx.expirySweep.start();
    this.ctx.webhooks.start();
    void this.ctx.webhooks
      .resealSecrets()
      .catch((err: unknown) => this.logger.warn({ err }, 'could not re-seal webhook signing secrets'));
    this.totpResealer.start();
    await serving.ready();
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.ctx.serving.metricsPort;
  }

  /** True when this start() created the bootstrap tenant and owner (the composition root prints them). */
  get bootstrapped(): boolean {
    return this.#bootstrapped;
  }

  get port(): number {
    return this.rpc.port;
  }

  /**
   * Deletes webhook deliveries finished more than `RELAYPLANE_WEBHOOKS_RETENTION_DAYS` ago, and
   * messages left with none (a job also does, hourly). Answers the deliveries deleted.
   */
  async pruneWebhookDeliveries(): Promise<number> {
    const days = this.ctx.config.webhooks.retentionDays;
    const cutoff = new Date(this.ctx.clock.now().getTime() - days * 86_400_000);
    const deleted = await this.ctx.webhookDeliveries.prune(cutoff);
    if (deleted > 0) this.logger.info({ deleted, retentionDays: days }, 'webhook deliveries pruned');
    return deleted;
  }

  /** Webhook fan-out and delivery (tests kick a dispatcher pass). */
  get webhooks() {
    return this.ctx.webhooks;
  }

  /** Deletes expired sessions and device grants now (a timer also does, every 10 minutes). */
  sweepExpiredSessions(): Promise<number> {
    return this.ctx.expirySweep.run();
  }

  /** Deletes the audit events past `RELAYPLANE_AUDIT_RETENTION_DAYS` now (a job also does, hourly). */
  pruneAuditEvents(): Promise<number> {
    return pruneAuditEvents({
      audit: this.audit,
      clock: this.ctx.clock,
      logger: this.logger,
      retentionDays: this.config.auditRetentionDays,
    });
  }

  /** Closes the context, the last built first. Also ends a start() still waiting for its dependencies. */
  destroy(): Promise<void> {
    return this.ctx.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}
