import { ServingStatus } from '@relayplane/shared/health';
import { watchRedis } from '@relayplane/shared/readiness';
import type { IssuerConfig } from './config.ts';
import { ISSUANCE_HEALTH_SERVICE, IssuerContext, type IssuerOverrides } from './context.ts';
import { migrations } from './db/migrations/index.ts';
import { scheduleCredentialRetention } from './issuance/credential-retention.ts';
import { scheduleKeyMaintenance } from './keys/key-maintenance.ts';
import { SESSION_SWEEP_INTERVAL_MS, SESSION_SWEEP_JOB } from './sessions/session-notices.ts';

export { type IssuerOverrides, MAINTENANCE_QUEUE } from './context.ts';

/** The issuer (signing keys and the JWKS, relay credentials, the relay registry, usage): its context, started and stopped. */
export class IssuerApp {
  readonly ctx: IssuerContext;

  private constructor(ctx: IssuerContext) {
    this.ctx = ctx;
  }

  static async create(config: IssuerConfig, overrides: IssuerOverrides = {}): Promise<IssuerApp> {
    return new IssuerApp(await IssuerContext.fromConfig(config, overrides));
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
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  get metrics() {
    return this.ctx.metrics;
  }
  get bus() {
    return this.ctx.bus;
  }
  get scheduler() {
    return this.ctx.scheduler;
  }
  get keys() {
    return this.ctx.keys;
  }
  get slots() {
    return this.ctx.slots;
  }
  get credentialWriter() {
    return this.ctx.credentialWriter;
  }
  get issuance() {
    return this.ctx.issuance;
  }
  get revocations() {
    return this.ctx.revocations;
  }
  get revocationFeed() {
    return this.ctx.revocationFeed;
  }
  get relays() {
    return this.ctx.relays;
  }
  /** Ends lapsed sessions now (a job also does, every 30 s): how many. */
  sweepLapsedSessions(): Promise<number> {
    return this.ctx.sessionSweep.run();
  }

  get retention() {
    return this.ctx.retention;
  }
  get audit() {
    return this.ctx.audit;
  }

  /**
   * Listens at once (alive, not ready: see serving.ts), then, each retried until PostgreSQL
   * answers: applies the migrations (safe with concurrent replicas), loads the signing keys
   * (creating the first ones on an empty database; a KEK that does not match them is a
   * configuration error), the relay registry and the revocation feed. Schedules key
   * maintenance and credential retention (which begin once Redis answers). Resolves once
   * ready; issuance has its own status (ISSUANCE_HEALTH_SERVICE), which follows Redis.
   */
  async start(): Promise<void> {
    const { serving, rpc, config, redis } = this.ctx;
    rpc.health.set(ISSUANCE_HEALTH_SERVICE, ServingStatus.NOT_SERVING);
    await serving.listen();
    await serving.step('migrations', async () => {
      const applied = await this.database.migrate(migrations);
      if (applied.length) this.logger.info({ applied }, 'migrations applied');
    });
    // Delivers what earlier runs left, and from now on what this one writes (admin may be away).
    this.audit.start();
    await serving.step('signing keys', () => startOrUndo(this.keys));
    await serving.step('relay registry', () => startOrUndo(this.relays));
    await serving.step('revocation feed', () => startOrUndo(this.revocationFeed));
    scheduleKeyMaintenance(this.scheduler, this.keys, config.keys.maintenanceIntervalSeconds * 1000);
    scheduleCredentialRetention(this.scheduler, this.retention);
    this.scheduler.every(SESSION_SWEEP_JOB, SESSION_SWEEP_INTERVAL_MS, async () => {
      await this.ctx.sessionSweep.run();
    });
    await this.scheduler.start();
    await serving.ready({ activeKid: this.keys.ring.activeKey()?.kid });
    if (redis) {
      this.ctx.onStop(
        watchRedis(
          rpc.health,
          [ISSUANCE_HEALTH_SERVICE],
          redis.requestPath,
          this.logger,
          'credential issuance',
        ),
      );
    } else {
      rpc.health.set(ISSUANCE_HEALTH_SERVICE, ServingStatus.SERVING);
    }
  }

  get port(): number {
    return this.rpc.port;
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.ctx.serving.metricsPort;
  }

  /** Closes the context in reverse build order. Also ends a start() still waiting for its dependencies. */
  destroy(): Promise<void> {
    return this.ctx.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}

/**
 * Starts a part of the issuer that follows the bus and the database (keys, relays, revocation
 * feed); a failed start is stopped before it throws, so the retry subscribes and sets its
 * timers once, not once per attempt.
 */
async function startOrUndo(part: { start(): Promise<void>; stop(): Promise<void> }): Promise<void> {
  try {
    await part.start();
  } catch (err) {
    await part.stop();
    throw err;
  }
}
