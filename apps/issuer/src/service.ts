import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { IssuerService } from '@relayplane/proto/issuer';
import {
  type AuditAdminClient,
  AuditOutbox,
  type AuditOutboxDatabase,
} from '@relayplane/shared/audit-outbox';
import { type Bus, MemoryBus } from '@relayplane/shared/bus';
import { type Clock, systemClock } from '@relayplane/shared/clock';
import { SERVICES } from '@relayplane/shared/contract';
import { connectCoordination } from '@relayplane/shared/coordination';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { grpcTls } from '@relayplane/shared/grpc-tls';
import { ServingStatus } from '@relayplane/shared/health';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type Registry, serviceHealthMetrics } from '@relayplane/shared/metrics';
import { watchRedis } from '@relayplane/shared/readiness';
import { createRequestPathRedis, deferringSubscriptions } from '@relayplane/shared/redis';
import { connect, RpcServer, type ServiceClient } from '@relayplane/shared/rpc';
import { MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import { Serving } from '@relayplane/shared/serving';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { IssuerConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';
import type { IssuerDatabase } from './db/schema.ts';
import { issuerHandlers } from './grpc/issuer-handlers.ts';
import { CredentialList } from './issuance/credential-list.ts';
import { CredentialRetention, scheduleCredentialRetention } from './issuance/credential-retention.ts';
import { CredentialStore } from './issuance/credential-store.ts';
import { CredentialWriter } from './issuance/credential-writer.ts';
import { Introspection } from './issuance/introspection.ts';
import { Issuance } from './issuance/issuance.ts';
import { RedisSlotStore } from './issuance/redis-slot-store.ts';
import { MemorySlotStore, type SlotStore } from './issuance/slot-store.ts';
import { UsageSummaryStore } from './issuance/usage-summary.ts';
import type { signCredential } from './keys/jwt.ts';
import { scheduleKeyMaintenance } from './keys/key-maintenance.ts';
import { SigningKeys } from './keys/signing-keys.ts';
import { IssuerMetrics } from './metrics.ts';
import { type RedisKeys, redisKeys } from './redis/keys.ts';
import { RelayDirectory } from './relays/relay-directory.ts';
import { RevocationFeed } from './revocation/revocation-feed.ts';
import { RedisRevocationMarks } from './revocation/revocation-marks.ts';
import { RevocationStore } from './revocation/revocation-store.ts';
import { Revocations } from './revocation/revocations.ts';
import { SigningKeyRevocation } from './revocation/signing-key-revocation.ts';

/** The issuers' bullmq queue of maintenance jobs (key maintenance, credential retention). */
export const MAINTENANCE_QUEUE = 'issuer-maintenance';

/**
 * The health status of issuance alone (grpc.health.v1): NOT_SERVING while the issuer cannot
 * reserve slots because its Redis connection is not ready, although the service itself (JWKS,
 * revocation feed, relays) is. For operators and probes; docs/ARCHITECTURE.md, Start-up.
 */
const ISSUANCE_HEALTH_SERVICE = `${IssuerService.typeName}/issuance`;

export interface IssuerOverrides {
  logger?: Logger;
  clock?: Clock;
  /** Shared with other services (embedded mode); the caller closes it. */
  bus?: Bus;
  /** Given to this service alone: it registers its job, starts and closes it. */
  scheduler?: Scheduler;
  /** Replaces the slot store (fault-injection tests); the service closes it. */
  slotStore?: SlotStore;
  /** Replaces the JWT signer (fault-injection tests). */
  sign?: typeof signCredential;
  /** An admin client instead of connecting to `config.adminAddress` (not closed by destroy). */
  admin?: AuditAdminClient;
}

/** Redis as this service uses it; undefined in embedded mode. */
interface RedisSetup {
  keys: RedisKeys;
  /** The request path's connection (slots, revocation markers). */
  requestPath: Redis;
  /** Every connection this service opened, closed by destroy. */
  connections: Redis[];
}

/** The issuer service: signing keys and the JWKS, relay credentials, the relay registry, usage. */
export class IssuerApp {
  readonly config: IssuerConfig;
  readonly logger: Logger;
  readonly database: Database<IssuerDatabase>;
  readonly rpc: RpcServer;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics: Registry;
  readonly bus: Bus;
  readonly scheduler: Scheduler;
  readonly keys: SigningKeys;
  /** Connection slots: Redis in distributed mode, in memory in embedded mode. */
  readonly slots: SlotStore;
  readonly credentialWriter: CredentialWriter;
  readonly issuance: Issuance;
  readonly revocations: Revocations;
  /** The revocation feed's long-polls (wake on this replica's revocations and on the bus). */
  readonly revocationFeed: RevocationFeed;
  readonly relays: RelayDirectory;
  /** Deletes credentials expired longer than the retention window (a maintenance job). */
  readonly retention: CredentialRetention;
  /** Audit events of this service's changes, delivered to admin (docs/audit.md). */
  readonly audit: AuditOutbox;
  /** Closed by destroy; undefined when the caller passed its own (`overrides.admin`). */
  readonly #ownAdmin: ServiceClient<typeof AdminRpc> | undefined;
  readonly #redis: RedisSetup | undefined;
  readonly #ownsBus: boolean;
  readonly #serving: Serving;
  #stopWatchingRedis: (() => void) | undefined;

  private constructor(deps: {
    config: IssuerConfig;
    logger: Logger;
    clock: Clock;
    database: Database<IssuerDatabase>;
    bus: Bus;
    ownsBus: boolean;
    scheduler: Scheduler;
    redis: RedisSetup | undefined;
    slotStore: SlotStore | undefined;
    sign: typeof signCredential | undefined;
    admin: AuditAdminClient | undefined;
  }) {
    const { config, logger, clock, database, redis } = deps;
    this.config = config;
    this.logger = logger;
    this.database = database;
    this.bus = deps.bus;
    this.#ownsBus = deps.ownsBus;
    this.scheduler = deps.scheduler;
    this.#redis = redis;
    this.metrics = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
    const metrics = new IssuerMetrics(this.metrics);
    const tls = grpcTls(config.grpcTls, logger);
    let admin = deps.admin;
    if (!admin) {
      this.#ownAdmin = connect(AdminRpc, config.adminAddress, { tls: tls?.client(SERVICES.admin) });
      admin = this.#ownAdmin;
    }
    this.audit = new AuditOutbox({
      db: database.db as unknown as Kysely<AuditOutboxDatabase>,
      source: SERVICES.issuer,
      admin,
      logger,
      metrics: this.metrics,
    });
    this.keys = new SigningKeys({
      db: database.db,
      kek: config.kek,
      previousKeks: config.previousKeks,
      policy: config.keys,
      clock,
      bus: this.bus,
      logger,
      audit: this.audit,
      metrics: this.metrics,
    });
    this.slots =
      deps.slotStore ??
      (redis
        ? new RedisSlotStore(redis.requestPath, redis.keys)
        : new MemorySlotStore(() => clock.now().getTime()));
    this.credentialWriter = new CredentialWriter(database);
    const credentialStore = new CredentialStore(database.db, database.schema);
    this.retention = new CredentialRetention({
      store: credentialStore,
      clock,
      logger,
      retentionDays: config.credentialRetentionDays,
      metrics: this.metrics,
    });
    this.relays = new RelayDirectory(database.db, config.relays, {
      clock,
      bus: this.bus,
      logger,
      audit: this.audit,
    });
    const maxTtlSeconds = config.keys.maxCredentialTtlSeconds;
    this.issuance = new Issuance({
      config: config.credentials,
      maxTtlSeconds,
      clock,
      logger,
      slots: this.slots,
      writer: this.credentialWriter,
      store: credentialStore,
      keys: this.keys.ring,
      relays: this.relays,
      sign: deps.sign,
      metrics,
    });
    const revocationStore = new RevocationStore(database.db, database.schema);
    this.revocationFeed = new RevocationFeed({
      bus: this.bus,
      clock,
      store: revocationStore,
      maxTtlSeconds,
      metrics,
    });
    this.revocations = new Revocations({
      clock,
      logger,
      bus: this.bus,
      store: revocationStore,
      marks: redis ? new RedisRevocationMarks(redis.requestPath, redis.keys) : null,
      slots: this.slots,
      feed: this.revocationFeed,
      audit: this.audit,
      metrics,
    });
    this.rpc = new RpcServer(logger, {
      maxConnectionAgeMs: config.maxConnectionAgeMs,
      metrics: this.metrics,
      tls,
      healthListen: config.healthListen,
    });
    this.#serving = new Serving({
      rpc: this.rpc,
      serviceName: IssuerService.typeName,
      database,
      listen: config.listen,
      metrics: this.metrics,
      metricsAddress: config.metricsAddress,
      logger,
      name: SERVICES.issuer,
    });
    serviceHealthMetrics(this.metrics, {
      health: this.rpc.health,
      services: [IssuerService.typeName, ISSUANCE_HEALTH_SERVICE],
      database,
      redis: redis?.requestPath,
    });
    const handlers = issuerHandlers({
      keys: this.keys,
      keyRevocation: new SigningKeyRevocation({
        clock,
        logger,
        bus: this.bus,
        store: revocationStore.signingKeys,
        maxTtlSeconds,
        keys: this.keys,
        feed: this.revocationFeed,
        audit: this.audit,
      }),
      issuance: this.issuance,
      introspection: new Introspection({
        config: config.credentials,
        clock,
        keys: this.keys.ring,
        revocations: this.revocations,
        relays: this.relays,
      }),
      credentialList: new CredentialList({ store: credentialStore, clock }),
      revocations: this.revocations,
      feed: this.revocationFeed,
      relays: this.relays,
      usage: new UsageSummaryStore(database.db),
      logger,
      metrics,
    });
    this.rpc.add(IssuerService, this.#serving.guard(IssuerService, handlers));
  }

  static async create(config: IssuerConfig, overrides: IssuerOverrides = {}): Promise<IssuerApp> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: SERVICES.issuer });
    let redis: RedisSetup | undefined;
    let bus = overrides.bus;
    let scheduler = overrides.scheduler;
    if (config.redis) {
      const keys = redisKeys(config.redis.prefix);
      // The request path (slots, revocation markers) gets its own connection that never queues.
      const requestPath = createRequestPathRedis(config.redis, logger, {
        name: 'issuer-slots',
        commandTimeoutMs: config.redisCommandTimeoutMs,
        // No auto-pipelining: the slot store already sends a tenant's reservations together,
        // and auto-pipelining would hold each call back to the next setImmediate (measured:
        // about 5 % fewer credentials per second with it).
        enableAutoPipelining: false,
      });
      const shared = connectCoordination(config.redis, logger, {
        name: SERVICES.issuer,
        busPrefix: keys.bus,
        queue: { name: MAINTENANCE_QUEUE, prefix: keys.bull },
        bus,
        scheduler,
      });
      // Keys, relays and the revocation feed subscribe at start: none of them may wait for Redis.
      bus = bus ?? deferringSubscriptions(shared.bus, shared.connections, logger);
      scheduler = shared.scheduler;
      redis = { keys, requestPath, connections: [requestPath, ...shared.connections] };
    }
    const database = await createDatabase<IssuerDatabase>(config.database, SERVICES.issuer, logger);
    return new IssuerApp({
      config,
      logger,
      clock: overrides.clock ?? systemClock,
      database,
      bus: bus ?? new MemoryBus(),
      ownsBus: overrides.bus === undefined,
      scheduler: scheduler ?? new MemoryScheduler(logger),
      redis,
      slotStore: overrides.slotStore,
      sign: overrides.sign,
      admin: overrides.admin,
    });
  }

  /**
   * Listens at once (alive, not ready: see serving.ts), then, each retried until PostgreSQL
   * answers: applies the migrations (safe with concurrent replicas), loads the signing keys
   * (creating the first ones on an empty database; a KEK that does not match them is a
   * configuration error), the relay registry and the revocation feed. Schedules key
   * maintenance and credential retention (which begin once Redis answers). Resolves once ready; issuance has its own
   * status (ISSUANCE_HEALTH_SERVICE), which follows Redis.
   */
  async start(): Promise<void> {
    const serving = this.#serving;
    this.rpc.health.set(ISSUANCE_HEALTH_SERVICE, ServingStatus.NOT_SERVING);
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
    scheduleKeyMaintenance(this.scheduler, this.keys, this.config.keys.maintenanceIntervalSeconds * 1000);
    scheduleCredentialRetention(this.scheduler, this.retention);
    await this.scheduler.start();
    await serving.ready({ activeKid: this.keys.ring.activeKey()?.kid });
    if (this.#redis) {
      this.#stopWatchingRedis = watchRedis(
        this.rpc.health,
        [ISSUANCE_HEALTH_SERVICE],
        this.#redis.requestPath,
        this.logger,
        'credential issuance',
      );
    } else {
      this.rpc.health.set(ISSUANCE_HEALTH_SERVICE, ServingStatus.SERVING);
    }
  }

  get port(): number {
    return this.rpc.port;
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.#serving.metricsPort;
  }

  /** Also ends a start() still waiting for its dependencies. */
  async destroy(): Promise<void> {
    this.#serving.stop();
    this.#stopWatchingRedis?.();
    // No key reloads (bus messages, refresh ticks) start while the service drains.
    await this.keys.stop();
    await this.scheduler.close();
    // Long-polls answer at once, so draining the server does not wait out their wait_ms.
    await this.revocationFeed.stop();
    await this.rpc.close();
    await this.credentialWriter.flushed();
    await this.relays.stop();
    // Rows it did not deliver stay in the outbox for another replica or the next start.
    await this.audit.stop();
    this.#ownAdmin?.close();
    await this.slots.close().catch(() => {});
    if (this.#ownsBus) await this.bus.close();
    for (const connection of this.#redis?.connections ?? []) connection.disconnect();
    await this.database.destroy();
    // Last: metrics stay scrapable while the service drains.
    await this.#serving.closeMetrics();
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
