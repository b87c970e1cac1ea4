/**
 * The issuer's composition root: the one place its dependencies are built (database, Redis,
 * bus, scheduler, the admin client, the audit outbox, signing keys, slots, issuance, revocation
 * and its feed, relays, the gRPC server and handlers) and their closers registered on one
 * Lifecycle, in the order they must close in reverse. `IssuerApp` only starts and stops.
 */

import { SERVICES } from '@relayplane/contract/contract';
import { AdminService } from '@relayplane/proto/admin';
import { IssuerService } from '@relayplane/proto/issuer';
import {
  type AuditAdminClient,
  AuditOutbox,
  type AuditOutboxDatabase,
} from '@relayplane/shared/audit-outbox';
import { type Bus, MemoryBus } from '@relayplane/shared/bus';
import { type Clock, systemClock } from '@relayplane/shared/clock';
import { connectCoordination } from '@relayplane/shared/coordination';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { grpcTls } from '@relayplane/shared/grpc-tls';
import { Lifecycle } from '@relayplane/shared/lifecycle';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type Registry } from '@relayplane/shared/metrics';
import { serviceHealthMetrics } from '@relayplane/shared/metrics-health';
import { createRequestPathRedis, deferringSubscriptions } from '@relayplane/shared/redis';
import { connect, RpcServer } from '@relayplane/shared/rpc';
import { MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import { Serving } from '@relayplane/shared/serving';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { IssuerConfig } from './config.ts';
import type { IssuerDatabase } from './db/schema.ts';
import { issuerHandlers } from './grpc/issuer-handlers.ts';
import { CredentialList } from './issuance/credential-list.ts';
import { CredentialRetention } from './issuance/credential-retention.ts';
import { CredentialStore } from './issuance/credential-store.ts';
import { CredentialWriter } from './issuance/credential-writer.ts';
import { Introspection } from './issuance/introspection.ts';
import { Issuance } from './issuance/issuance.ts';
import { RedisSlotStore } from './issuance/redis-slot-store.ts';
import { MemorySlotStore, type SlotStore } from './issuance/slot-store.ts';
import { UsageSummaryStore } from './issuance/usage-summary.ts';
import type { signCredential } from './keys/jwt.ts';
import { SigningKeys } from './keys/signing-keys.ts';
import { IssuerMetrics } from './metrics.ts';
import { type RedisKeys, redisKeys } from './redis/keys.ts';
import { RelayDirectory } from './relays/relay-directory.ts';
import { RevocationFeed } from './revocation/revocation-feed.ts';
import { RedisRevocationMarks } from './revocation/revocation-marks.ts';
import { RevocationStore } from './revocation/revocation-store.ts';
import { Revocations } from './revocation/revocations.ts';
import { SigningKeyRevocation } from './revocation/signing-key-revocation.ts';
import { RelaySessions } from './sessions/relay-sessions.ts';
import { RelaySessionMetrics } from './sessions/session-metrics.ts';
import { CapNotices, LapsedSessionSweep, RefusalTally } from './sessions/session-notices.ts';
import { RelaySessionStore } from './sessions/session-store.ts';

/** The issuers' bullmq queue of maintenance jobs (key maintenance, credential retention). */
export const MAINTENANCE_QUEUE = 'issuer-maintenance';

/**
 * The health status of issuance alone (grpc.health.v1): NOT_SERVING while the issuer cannot
 * reserve slots because its Redis connection is not ready, although the service itself (JWKS,
 * revocation feed, relays) is. For operators and probes; docs/ARCHITECTURE.md, Start-up.
 */
export const ISSUANCE_HEALTH_SERVICE = `${IssuerService.typeName}/issuance`;

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
  /** An admin client instead of connecting to `config.adminAddress` (not closed here). */
  admin?: AuditAdminClient;
}

/** Redis as the issuer uses it; undefined in embedded mode. */
export interface RedisSetup {
  keys: RedisKeys;
  /** The request path's connection (slots, revocation markers). */
  requestPath: Redis;
}

type Fields = Omit<IssuerContext, 'close' | 'onStop'>;

export class IssuerContext {
  readonly lifecycle!: Lifecycle;
  readonly config!: IssuerConfig;
  readonly logger!: Logger;
  readonly clock!: Clock;
  readonly database!: Database<IssuerDatabase>;
  /** Undefined in embedded mode. */
  readonly redis!: RedisSetup | undefined;
  readonly bus!: Bus;
  readonly scheduler!: Scheduler;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics!: Registry;
  readonly rpc!: RpcServer;
  readonly serving!: Serving;
  /** Audit events of this service's changes, delivered to admin (docs/audit.md). */
  readonly audit!: AuditOutbox;
  readonly keys!: SigningKeys;
  /** Connection slots: Redis in distributed mode, in memory in embedded mode. */
  readonly slots!: SlotStore;
  readonly credentialWriter!: CredentialWriter;
  readonly issuance!: Issuance;
  readonly revocations!: Revocations;
  /** The revocation feed's long-polls (wake on this replica's revocations and on the bus). */
  readonly revocationFeed!: RevocationFeed;
  readonly relays!: RelayDirectory;
  /** Deletes credentials expired longer than the retention window (a maintenance job). */
  readonly retention!: CredentialRetention;
  /** Ends sessions whose grant lapsed without an end, with their session.ended (a maintenance job). */
  readonly sessionSweep!: LapsedSessionSweep;
  /** What start() begins that must end first on close (the issuance health watch). */
  readonly #stops: (() => void)[] = [];

  private constructor(fields: Fields) {
    Object.assign(this, fields);
    // Registered after everything but serving's stop: ended right after readiness is withdrawn.
    this.lifecycle.onClose('started watches', () => {
      for (const stop of this.#stops) stop();
    });
    this.lifecycle.use('serving', this.serving, (s) => s.stop());
  }

  static async fromConfig(config: IssuerConfig, overrides: IssuerOverrides = {}): Promise<IssuerContext> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: SERVICES.issuer });
    const clock = overrides.clock ?? systemClock;
    const lifecycle = new Lifecycle(logger);
    const fields = await lifecycle.build(async () => {
      // First registered, so closed last: metrics stay scrapable while the service drains.
      let serving: Serving | undefined;
      lifecycle.onClose('metrics listener', () => serving?.closeMetrics());
      const database = lifecycle.use(
        'database',
        await createDatabase<IssuerDatabase>(config.database, SERVICES.issuer, logger),
        (d) => d.destroy(),
      );
      const db = database.db;
      const { redis, bus, scheduler } = connectRedis(config, overrides, logger, lifecycle);
      const slots = lifecycle.use(
        'slot store',
        overrides.slotStore ??
          (redis
            ? new RedisSlotStore(redis.requestPath, redis.keys)
            : new MemorySlotStore(() => clock.now().getTime())),
        (s) => s.close().catch(() => {}),
      );
      const tls = grpcTls(config.grpcTls, logger);
      const admin =
        overrides.admin ??
        lifecycle.use(
          'admin client',
          connect(AdminService, config.adminAddress, { tls: tls?.client(SERVICES.admin) }),
          (c) => c.close(),
        );
      const registry = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
      const metrics = new IssuerMetrics(registry);
      // Rows it did not deliver stay in the outbox for another replica or the next start.
      const audit = lifecycle.use(
        'audit outbox',
        new AuditOutbox({
          db: db as unknown as Kysely<AuditOutboxDatabase>,
          source: SERVICES.issuer,
          admin,
          logger,
          metrics: registry,
        }),
        (a) => a.stop(),
      );
      const relays = lifecycle.use(
        'relay directory',
        new RelayDirectory(db, config.relays, { clock, bus, logger, audit }),
        (r) => r.stop(),
      );
      const credentialWriter = lifecycle.use('credential writer', new CredentialWriter(database), (w) =>
        w.flushed(),
      );
      const rpc = lifecycle.use(
        'gRPC server',
        new RpcServer(logger, {
          maxConnectionAgeMs: config.maxConnectionAgeMs,
          metrics: registry,
          tls,
          healthListen: config.healthListen,
        }),
        (r) => r.close(),
      );
      const maxTtlSeconds = config.keys.maxCredentialTtlSeconds;
      const revocationStore = new RevocationStore(db, database.schema);
      // Long-polls answer at once, so draining the server does not wait out their wait_ms.
      const revocationFeed = lifecycle.use(
        'revocation feed',
        new RevocationFeed({ bus, clock, store: revocationStore, maxTtlSeconds, metrics }),
        (f) => f.stop(),
      );
      lifecycle.use('scheduler', scheduler, (s) => s.close());
      // No key reloads (bus messages, refresh ticks) start while the service drains.
      const keys = lifecycle.use(
        'signing keys',
        new SigningKeys({
          db,
          kek: config.kek,
          previousKeks: config.previousKeks,
          policy: config.keys,
          clock,
          bus,
          logger,
          audit,
          metrics: registry,
        }),
        (k) => k.stop(),
      );
      const credentialStore = new CredentialStore(db, database.schema);
      // Webhook notices (issue 34): refusals counted per window, the cap at most once a minute.
      const noticeDeps = { db, audit, clock, logger };
      const refusalTally = lifecycle.use(
        'session refusal notices',
        new RefusalTally(noticeDeps, config.sessions.refusalWindowSeconds * 1000),
        (t) => t.stop(),
      );
      refusalTally.start();
      const capNotices = new CapNotices(noticeDeps);
      // Slots are held by credentials until they connect, then by their sessions.
      const sessionStore = new RelaySessionStore(db, config.sessions.connectWindowSeconds);
      const issuance = new Issuance({
        config: config.credentials,
        maxTtlSeconds,
        clock,
        logger,
        slots,
        writer: credentialWriter,
        store: credentialStore,
        ledger: sessionStore,
        connectWindowMs: config.sessions.connectWindowSeconds * 1000,
        keys: keys.ring,
        relays,
        sign: overrides.sign,
        metrics,
        capNotices,
      });
      const revocations = new Revocations({
        clock,
        logger,
        bus,
        store: revocationStore,
        marks: redis ? new RedisRevocationMarks(redis.requestPath, redis.keys) : null,
        slots,
        feed: revocationFeed,
        audit,
        metrics,
      });
      serving = new Serving({
        rpc,
        serviceName: IssuerService.typeName,
        database,
        listen: config.listen,
        metrics: registry,
        metricsAddress: config.metricsAddress,
        logger,
        name: SERVICES.issuer,
      });
      serviceHealthMetrics(registry, {
        health: rpc.health,
        services: [IssuerService.typeName, ISSUANCE_HEALTH_SERVICE],
        database,
        redis: redis?.requestPath,
      });
      const introspection = new Introspection({
        config: config.credentials,
        clock,
        keys: keys.ring,
        revocations,
        relays,
      });
      const handlers = issuerHandlers({
        keys,
        keyRevocation: new SigningKeyRevocation({
          clock,
          logger,
          bus,
          store: revocationStore.signingKeys,
          maxTtlSeconds,
          keys,
          feed: revocationFeed,
          audit,
        }),
        issuance,
        introspection,
        sessions: new RelaySessions({
          config: config.sessions,
          clock,
          logger,
          store: sessionStore,
          introspection,
          revocations,
          relays,
          slots,
          audit,
          metrics: new RelaySessionMetrics(registry, () => sessionStore.liveCount()),
          notices: { refusals: refusalTally, cap: capNotices },
        }),
        sessionStore,
        slots,
        credentialList: new CredentialList({ store: credentialStore, clock }),
        revocations,
        feed: revocationFeed,
        relays,
        usage: new UsageSummaryStore(db),
        logger,
        metrics,
      });
      rpc.add(IssuerService, serving.guard(IssuerService, handlers));
      const retention = new CredentialRetention({
        store: credentialStore,
        clock,
        logger,
        retentionDays: config.credentialRetentionDays,
        metrics: registry,
      });
      return {
        database,
        redis,
        bus,
        scheduler,
        metrics: registry,
        rpc,
        serving,
        audit,
        keys,
        slots,
        credentialWriter,
        issuance,
        revocations,
        revocationFeed,
        relays,
        retention,
        sessionSweep: new LapsedSessionSweep({ store: sessionStore, audit, clock, logger }),
      };
    });
    return new IssuerContext({ lifecycle, config, logger, clock, ...fields });
  }

  /** Registers what start() began (a watch) to end first on close. */
  onStop(stop: () => void): void {
    this.#stops.push(stop);
  }

  /** Closes everything, in reverse of the order registered. */
  close(): Promise<void> {
    return this.lifecycle.close();
  }
}

/** The request path's connection, and the bus and scheduler on Redis (unless given); memory without Redis. */
function connectRedis(
  config: IssuerConfig,
  overrides: IssuerOverrides,
  logger: Logger,
  lifecycle: Lifecycle,
): { redis: RedisSetup | undefined; bus: Bus; scheduler: Scheduler } {
  let { bus, scheduler } = overrides;
  let redis: RedisSetup | undefined;
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
    lifecycle.onClose('redis', () => {
      for (const connection of [requestPath, ...shared.connections]) connection.disconnect();
    });
    // Keys, relays and the revocation feed subscribe at start: none of them may wait for Redis.
    bus = bus ?? deferringSubscriptions(shared.bus, shared.connections, logger);
    scheduler = shared.scheduler;
    redis = { keys, requestPath };
  }
  if (!overrides.bus) {
    bus ??= new MemoryBus();
    lifecycle.use('bus', bus, (b) => b.close());
  }
  return { redis, bus: bus as Bus, scheduler: scheduler ?? new MemoryScheduler(logger) };
}
