import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { type Bus, MemoryBus } from '@relayplane/shared/bus';
import { type Clock, systemClock } from '@relayplane/shared/clock';
import { SERVICES } from '@relayplane/shared/contract';
import { connectCoordination } from '@relayplane/shared/coordination';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { grpcTls } from '@relayplane/shared/grpc-tls';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type Registry, serviceHealthMetrics } from '@relayplane/shared/metrics';
import { createRateLimiter, type RateLimiter } from '@relayplane/shared/rate-limit';
import { createRequestPathRedis, waitReady } from '@relayplane/shared/redis';
import { connect, RpcServer, type ServiceClient } from '@relayplane/shared/rpc';
import { MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import { Serving } from '@relayplane/shared/serving';
import type { Redis } from 'ioredis';
import { AuditSigningKey } from './audit/checkpoint-key.ts';
import { AuditCheckpoints } from './audit/checkpoints.ts';
import { AuditTrail } from './audit/trail.ts';
import type { AdminConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';
import type { AdminDatabase } from './db/schema.ts';
import { adminHandlers } from './grpc/admin-handlers.ts';
import { bootstrapOwner } from './jobs/bootstrap-owner.ts';
import { AUDIT_PRUNE_INTERVAL_MS, AUDIT_PRUNE_JOB, pruneAuditEvents } from './jobs/prune-audit.ts';
import { TotpResealer } from './jobs/reseal-totp-secrets.ts';

/** Signs every chain head that moved (docs/audit.md, "Signed checkpoints"). */
export const AUDIT_CHECKPOINT_JOB = 'audit-checkpoint';

import { SWEEP_INTERVAL_MS, sweepExpired } from './jobs/sweep-expired.ts';
import { adminMetrics } from './metrics.ts';
import { SecretSealer } from './mfa/sealing.ts';
import { SecondFactors } from './mfa/second-factor.ts';
import { bullPrefix } from './redis/keys.ts';
import { DeviceTokens } from './security/device-tokens.ts';
import { createPasswordHasher, type PasswordHasher } from './security/passwords.ts';
import { AccountStore } from './stores/accounts.ts';
import { AllowlistStore } from './stores/allowlist.ts';
import { ApiKeyStore } from './stores/api-keys.ts';
import { BotStore } from './stores/bots.ts';
import { DeviceGrantStore } from './stores/device-grants.ts';
import { IdentityTokenStore } from './stores/identity-tokens.ts';
import { LoginChallengeStore } from './stores/login-challenges.ts';
import { ProjectStore } from './stores/projects.ts';
import { SecondFactorStore } from './stores/second-factors.ts';
import { SessionStore } from './stores/sessions.ts';
import { RedisThrottledRefusals, recordEveryRefusal } from './stores/throttled-refusals.ts';

export interface AdminOverrides {
  logger?: Logger;
  clock?: Clock;
  /** A billing client to use instead of connecting to `config.billingAddress` (not closed by destroy). */
  billing?: ServiceClient<typeof BillingRpc>;
  /**
   * The bus revoked API keys are announced on, instead of one built from `config.redis`
   * (embedded mode passes its shared in-process bus). It belongs to the caller: not closed by destroy.
   */
  bus?: Bus;
  /** The password hasher (tests hold a verification open to race it); default argon2id. */
  passwords?: PasswordHasher;
}

/** The bus this service announces on, its job scheduler, and what destroy() must close of them. */
interface BusSetup {
  bus: Bus;
  owned: boolean;
  connections: Redis[];
  /** Admin's maintenance jobs (audit retention): bullmq with Redis, timers without. */
  scheduler: Scheduler;
}

const QUEUE_NAME = 'admin-maintenance';

function createBus(config: AdminConfig, logger: Logger, given: Bus | undefined): BusSetup {
  if (!config.redis) {
    return {
      bus: given ?? new MemoryBus(),
      owned: given === undefined,
      connections: [],
      scheduler: new MemoryScheduler(logger),
    };
  }
  const { bus, connections, scheduler } = connectCoordination(config.redis, logger, {
    name: SERVICES.admin,
    busPrefix: config.redis.prefix,
    queue: { name: QUEUE_NAME, prefix: bullPrefix(config.redis.prefix) },
    bus: given,
  });
  return {
    bus,
    owned: given === undefined,
    connections,
    scheduler: scheduler ?? new MemoryScheduler(logger),
  };
}

/** The throttles' Redis connection (login and device flow share it): on the request path, short timeouts. */
function createThrottleRedis(
  config: AdminConfig,
  logger: Logger,
): { connection: Redis; prefix: string } | undefined {
  if (!config.redis) return undefined;
  const connection = createRequestPathRedis(config.redis, logger, {
    name: 'admin-throttle',
    commandTimeoutMs: 500,
  });
  return { connection, prefix: config.redis.prefix };
}

/** How long start() waits for the throttle's Redis; past it, login uses the in-memory limits until Redis answers. */
const THROTTLE_READY_WAIT_MS = 1_000;

/** The admin service: tenants, users, sessions, projects, API keys, bots, IP allowlists. */
export class AdminService {
  readonly config: AdminConfig;
  readonly logger: Logger;
  readonly database: Database<AdminDatabase>;
  readonly rpc: RpcServer;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics: Registry;
  readonly accounts: AccountStore;
  readonly sessions: SessionStore;
  readonly apiKeys: ApiKeyStore;
  /** The audit trail (docs/audit.md). */
  readonly audit: AuditTrail;
  /** Signed checkpoints of its chains (docs/audit.md, "Signed checkpoints"). */
  readonly checkpoints: AuditCheckpoints;
  /** Where revoked API keys are announced (`BUS_CHANNELS.apiKeysRevoked`). */
  readonly bus: Bus;
  /** Counts login attempts (per account, per client IP, per account and client IP). */
  readonly loginThrottle: RateLimiter;
  readonly #throttleConnection: Redis | undefined;
  readonly #deviceGrants: DeviceGrantStore;
  readonly #loginChallenges: LoginChallengeStore;
  readonly #busSetup: BusSetup;
  readonly #billing: ServiceClient<typeof BillingRpc>;
  readonly #ownsBilling: boolean;
  readonly #passwords: PasswordHasher;
  readonly #clock: Clock;
  readonly #serving: Serving;
  /** Re-seals second-factor secrets under the current KEK after a rotation (at start, then hourly). */
  readonly totpResealer: TotpResealer;
  #sweep: NodeJS.Timeout | undefined;
  /** The sweep start() runs; destroy() waits for it (it never rejects). */
  #startSweep: Promise<number> | undefined;
  #bootstrapped = false;

  private constructor(
    config: AdminConfig,
    logger: Logger,
    database: Database<AdminDatabase>,
    passwords: PasswordHasher,
    busSetup: BusSetup,
    overrides: AdminOverrides,
  ) {
    this.config = config;
    this.logger = logger;
    this.database = database;
    this.#passwords = passwords;
    this.#clock = overrides.clock ?? systemClock;
    this.#ownsBilling = overrides.billing === undefined;
    const tls = grpcTls(config.grpcTls, logger);
    this.#billing =
      overrides.billing ?? connect(BillingRpc, config.billingAddress, { tls: tls?.client(SERVICES.billing) });
    this.accounts = new AccountStore(database.db);
    this.sessions = new SessionStore(database.db);
    this.apiKeys = new ApiKeyStore(database.db);
    this.audit = new AuditTrail(database.db, this.#clock, logger);
    this.#deviceGrants = new DeviceGrantStore(database.db);
    this.#loginChallenges = new LoginChallengeStore(database.db);
    this.#busSetup = busSetup;
    this.bus = busSetup.bus;
    const throttleRedis = createThrottleRedis(config, logger);
    this.#throttleConnection = throttleRedis?.connection;
    this.loginThrottle = createRateLimiter(
      throttleRedis,
      config.loginLimits.windowSeconds * 1000,
      this.#clock,
      logger,
      'login throttle',
    );
    this.metrics = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
    this.rpc = new RpcServer(logger, {
      maxConnectionAgeMs: config.maxConnectionAgeMs,
      metrics: this.metrics,
      tls,
      healthListen: config.healthListen,
    });
    this.#serving = new Serving({
      rpc: this.rpc,
      serviceName: AdminRpc.typeName,
      database,
      listen: config.listen,
      metrics: this.metrics,
      metricsAddress: config.metricsAddress,
      logger,
      name: SERVICES.admin,
    });
    serviceHealthMetrics(this.metrics, {
      health: this.rpc.health,
      services: [AdminRpc.typeName],
      database,
      redis: throttleRedis?.connection,
    });
    const secondFactors = new SecondFactorStore(database.db);
    this.checkpoints = new AuditCheckpoints(
      database.db,
      config.auditSigningKeyFile
        ? AuditSigningKey.fromFile(config.auditSigningKeyFile)
        : AuditSigningKey.fromKek(config.kek),
      logger,
    );
    const sealer = new SecretSealer(config.kek, config.kekPrevious);
    this.totpResealer = new TotpResealer({
      store: secondFactors,
      sealer,
      logger,
      report: adminMetrics(this.metrics).totpSecretsNotUnderKek,
    });
    const handlers = adminHandlers({
      audit: this.audit,
      checkpoints: this.checkpoints,
      accounts: this.accounts,
      sessions: this.sessions,
      projects: new ProjectStore(database.db),
      apiKeys: this.apiKeys,
      allowlist: new AllowlistStore(database.db),
      bots: new BotStore(database.db, config.perBotLimits.maxActiveKeys),
      identityTokens: new IdentityTokenStore(database.db, config.perBotLimits.maxActiveIdentityTokens),
      passwords,
      billing: this.#billing,
      bus: this.bus,
      clock: this.#clock,
      logger,
      metrics: adminMetrics(this.metrics),
      loginThrottle: this.loginThrottle,
      loginLimits: config.loginLimits,
      loginSlowdown: createRateLimiter(
        throttleRedis,
        config.loginLimits.slowSeconds * 1000,
        this.#clock,
        logger,
        'login slowdown',
      ),
      deviceTokens: new DeviceTokens(config.kek),
      secondFactor: new SecondFactors({
        store: secondFactors,
        sealer,
        clock: this.#clock,
        throttle: this.loginThrottle,
        maxAttempts: config.loginLimits.maxPerAccountAndIp,
        audit: this.audit,
        logger,
      }),
      secondFactors,
      sealer,
      loginChallenges: this.#loginChallenges,
      throttleIpv6Prefix: config.throttleIpv6Prefix,
      signupThrottle: createRateLimiter(
        throttleRedis,
        config.signupLimits.windowSeconds * 1000,
        this.#clock,
        logger,
        'sign-up throttle',
      ),
      signupLimits: config.signupLimits,
      throttledRefusals: throttleRedis
        ? new RedisThrottledRefusals(throttleRedis.connection, throttleRedis.prefix, logger)
        : recordEveryRefusal,
      sessionTtlSeconds: config.sessionTtlSeconds,
      signupEnabled: config.signupEnabled,
      deviceGrants: this.#deviceGrants,
      deviceThrottle: createRateLimiter(
        throttleRedis,
        config.deviceFlow.limits.windowSeconds * 1000,
        this.#clock,
        logger,
        'device flow throttle',
      ),
      deviceFlow: config.deviceFlow,
    });
    this.rpc.add(AdminRpc, this.#serving.guard(AdminRpc, handlers));
  }

  static async create(config: AdminConfig, overrides: AdminOverrides = {}): Promise<AdminService> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: SERVICES.admin });
    const passwords = overrides.passwords ?? (await createPasswordHasher());
    const database = await createDatabase<AdminDatabase>(config.database, SERVICES.admin, logger);
    return new AdminService(
      config,
      logger,
      database,
      passwords,
      createBus(config, logger, overrides.bus),
      overrides,
    );
  }

  /**
   * Listens at once (alive, not ready: see serving.ts), then, each retried until it succeeds
   * (PostgreSQL or billing may start later): applies the migrations (safe with concurrent
   * replicas) and creates the bootstrap owner if due. Resolves once ready.
   */
  async start(): Promise<void> {
    const serving = this.#serving;
    await serving.listen();
    await serving.step('migrations', async () => {
      const applied = await this.database.migrate(migrations);
      if (applied.length) this.logger.info({ applied }, 'migrations applied');
    });
    const bootstrap = this.config.bootstrap;
    if (bootstrap) {
      const outcome = await serving.step('bootstrap owner', () =>
        bootstrapOwner(bootstrap, {
          accounts: this.accounts,
          audit: this.audit,
          passwords: this.#passwords,
          billing: this.#billing,
          clock: this.#clock,
          logger: this.logger,
          signal: serving.signal,
        }),
      );
      this.#bootstrapped = outcome === 'created';
    }
    if (this.#throttleConnection) await waitReady(this.#throttleConnection, THROTTLE_READY_WAIT_MS);
    const scheduler = this.#busSetup.scheduler;
    scheduler.every(AUDIT_CHECKPOINT_JOB, this.config.auditCheckpointSeconds * 1000, async () => {
      await this.checkpoints.checkpointAll(this.#clock.now());
    });
    scheduler.every(AUDIT_PRUNE_JOB, AUDIT_PRUNE_INTERVAL_MS, async () => {
      await this.pruneAuditEvents();
    });
    await scheduler.start();
    // Once at start, then on the timer: a replica restarted more often than every
    // SWEEP_INTERVAL_MS (a rollout a few minutes apart) would otherwise never sweep.
    this.#startSweep = this.sweepExpiredSessions();
    this.#sweep = setInterval(() => void this.sweepExpiredSessions(), SWEEP_INTERVAL_MS);
    this.#sweep.unref();
    this.totpResealer.start();
    await serving.ready();
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.#serving.metricsPort;
  }

  /** True when this start() created the bootstrap tenant and owner (the composition root prints them). */
  get bootstrapped(): boolean {
    return this.#bootstrapped;
  }

  get port(): number {
    return this.rpc.port;
  }

  /** Deletes expired sessions and device grants now (a timer also does, every 10 minutes). */
  sweepExpiredSessions(): Promise<number> {
    return sweepExpired({
      sessions: this.sessions,
      deviceGrants: this.#deviceGrants,
      loginChallenges: this.#loginChallenges,
      clock: this.#clock,
      logger: this.logger,
    });
  }

  /** Admin's maintenance jobs (`audit-prune`): bullmq with Redis, timers without. */
  get scheduler(): Scheduler {
    return this.#busSetup.scheduler;
  }

  /** Deletes the audit events past `RELAYPLANE_AUDIT_RETENTION_DAYS` now (a job also does, hourly). */
  pruneAuditEvents(): Promise<number> {
    return pruneAuditEvents({
      audit: this.audit,
      clock: this.#clock,
      logger: this.logger,
      retentionDays: this.config.auditRetentionDays,
    });
  }

  /** Also ends a start() still waiting for its dependencies. */
  async destroy(): Promise<void> {
    this.#serving.stop();
    clearInterval(this.#sweep);
    await this.#startSweep;
    await this.totpResealer.stop();
    await this.#busSetup.scheduler.close();
    await this.rpc.close();
    if (this.#ownsBilling) this.#billing.close();
    if (this.#busSetup.owned) await this.bus.close();
    for (const connection of this.#busSetup.connections) connection.disconnect();
    this.#throttleConnection?.disconnect();
    await this.database.destroy();
    // Last: metrics stay scrapable while the service drains.
    await this.#serving.closeMetrics();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}
