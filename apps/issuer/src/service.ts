import type { KeyObject } from 'node:crypto';
import { IssuerService as IssuerRpc } from '@relayplane/proto/issuer';
import { type Bus, MemoryBus, RedisBus } from '@relayplane/shared/bus';
import { type Clock, systemClock } from '@relayplane/shared/clock';
import { ConfigError } from '@relayplane/shared/config';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type MetricsServer, type Registry, serveMetrics } from '@relayplane/shared/metrics';
import { watchDatabase } from '@relayplane/shared/readiness';
import { createRedis, createRequestPathRedis, waitReady } from '@relayplane/shared/redis';
import { RpcServer } from '@relayplane/shared/rpc';
import { BullmqScheduler, MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import type { IssuerConfig } from './config.ts';
import { Credentials } from './credentials/credentials.ts';
import type { signCredential } from './credentials/jwt.ts';
import { UsageSummary, usageHandlers } from './credentials/usage-summary.ts';
import { migrations } from './db/migrations/index.ts';
import type { IssuerDatabase } from './db/schema.ts';
import { compareKeys } from './domain/key-lifecycle.ts';
import { credentialHandlers } from './grpc/credential-handlers.ts';
import { issuerHandlers, type SigningKeyListing } from './grpc/issuer-handlers.ts';
import { KeyMaintenance, type MaintenanceResult } from './keys/key-maintenance.ts';
import { kekFingerprint, openPrivateKey } from './keys/key-material.ts';
import { type ActiveSigningKey, type JwksDocument, KeyRing } from './keys/key-ring.ts';
import { IssuerMetrics } from './metrics.ts';
import { redisKeys } from './redis/keys.ts';
import { RedisRevocationMarks } from './redis/revocation-marks.ts';
import { RelayDirectory } from './relays/relay-directory.ts';
import { relayHandlers } from './relays/relay-handlers.ts';
import { RedisSlotStore } from './slots/redis-slot-store.ts';
import { MemorySlotStore, type SlotStore } from './slots/slot-store.ts';
import { CredentialWriter } from './stores/credential-writer.ts';
import { CredentialStore } from './stores/credentials.ts';
import { SigningKeyStore } from './stores/signing-keys.ts';

/** Bus channel announcing that the stored key set changed; every replica reloads on it. */
export const SIGNING_KEYS_CHANGED_CHANNEL = 'signing-keys.changed';
/** Scheduler job (bullmq job scheduler id) running the key maintenance tick. */
export const KEY_MAINTENANCE_JOB = 'issuer-key-maintenance';
const QUEUE_NAME = 'issuer-maintenance';

type RedisConnection = ReturnType<typeof createRedis>;

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
}

export type KeysReloadReason = 'start' | 'tick' | 'bus' | 'refresh';

export interface KeysReloadedEvent {
  reason: KeysReloadReason;
  /** True when the published key set differs from before the reload. */
  changed: boolean;
  jwks: JwksDocument;
}

/** The issuer service: signing keys, their rotation and the JWKS. */
export class IssuerService {
  readonly config: IssuerConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly database: Database<IssuerDatabase>;
  readonly rpc: RpcServer;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics: Registry;
  readonly bus: Bus;
  readonly scheduler: Scheduler;
  readonly store: SigningKeyStore;
  readonly keyRing: KeyRing;
  readonly maintenance: KeyMaintenance;
  /** Connection slots: Redis in distributed mode, in memory in embedded mode. */
  readonly slots: SlotStore;
  readonly credentialWriter: CredentialWriter;
  readonly credentialStore: CredentialStore;
  readonly credentials: Credentials;
  readonly relayDirectory: RelayDirectory;
  readonly #slotRedis: RedisConnection | null;
  readonly #ownsBus: boolean;
  readonly #redis: RedisConnection[];
  readonly #listeners = new Set<(event: KeysReloadedEvent) => void>();
  #reloadChain: Promise<void> = Promise.resolve();
  #unsubscribe: (() => Promise<void>) | undefined;
  #refreshTimer: NodeJS.Timeout | undefined;
  #watch: { stop: () => void } | undefined;
  #metricsServer: MetricsServer | undefined;

  private constructor(deps: {
    config: IssuerConfig;
    logger: Logger;
    clock: Clock;
    database: Database<IssuerDatabase>;
    bus: Bus;
    ownsBus: boolean;
    scheduler: Scheduler;
    redis: RedisConnection[];
    slotRedis: RedisConnection | null;
    slotStore: SlotStore | undefined;
    sign: typeof signCredential | undefined;
  }) {
    this.config = deps.config;
    this.logger = deps.logger;
    this.clock = deps.clock;
    this.database = deps.database;
    this.bus = deps.bus;
    this.#ownsBus = deps.ownsBus;
    this.scheduler = deps.scheduler;
    this.#redis = deps.redis;
    this.store = new SigningKeyStore(deps.database.db);
    this.keyRing = new KeyRing(deps.config.kek);
    this.maintenance = new KeyMaintenance({
      store: this.store,
      kek: deps.config.kek,
      policy: deps.config.keys,
      logger: deps.logger,
    });
    this.#slotRedis = deps.slotRedis;
    this.metrics = createRegistry({ defaultMetrics: deps.config.metricsAddress !== undefined });
    const metrics = new IssuerMetrics(this.metrics);
    const keys = deps.config.redis ? redisKeys(deps.config.redis.prefix) : null;
    this.slots =
      deps.slotStore ??
      (deps.slotRedis && keys
        ? new RedisSlotStore(deps.slotRedis, keys)
        : new MemorySlotStore(() => deps.clock.now().getTime()));
    this.credentialWriter = new CredentialWriter(deps.database);
    this.credentialStore = new CredentialStore(deps.database.db);
    this.relayDirectory = new RelayDirectory(deps.database.db, deps.config.relays, {
      clock: deps.clock,
      bus: deps.bus,
      logger: deps.logger,
    });
    this.credentials = new Credentials({
      config: deps.config.credentials,
      maxTtlSeconds: deps.config.keys.maxCredentialTtlSeconds,
      clock: deps.clock,
      logger: deps.logger,
      bus: deps.bus,
      slots: this.slots,
      marks: deps.slotRedis && keys ? new RedisRevocationMarks(deps.slotRedis, keys) : null,
      writer: this.credentialWriter,
      store: this.credentialStore,
      keys: this.keyRing,
      relays: this.relayDirectory,
      sign: deps.sign,
      metrics,
    });
    this.rpc = new RpcServer(deps.logger, {
      maxConnectionAgeMs: deps.config.maxConnectionAgeMs,
      metrics: this.metrics,
    });
    this.rpc.add(
      IssuerRpc,
      issuerHandlers(this, {
        ...credentialHandlers(this.credentials, deps.logger, metrics),
        ...relayHandlers(this.relayDirectory),
        ...usageHandlers(new UsageSummary(deps.database.db)),
      }),
    );
  }

  static async create(config: IssuerConfig, overrides: IssuerOverrides = {}): Promise<IssuerService> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: 'issuer' });
    const redis: RedisConnection[] = [];
    let bus = overrides.bus;
    let scheduler = overrides.scheduler;
    if (config.redis && (!bus || !scheduler)) {
      const main = createRedis(config.redis, logger, 'issuer');
      redis.push(main);
      if (!bus) {
        const subscriber = createRedis(config.redis, logger, 'issuer-bus');
        redis.push(subscriber);
        bus = new RedisBus(main, subscriber, config.redis.prefix);
      }
      scheduler ??= new BullmqScheduler(QUEUE_NAME, main, `${config.redis.prefix}bull`, logger);
    }
    // The request path (slots, revocation markers) gets its own connection that never queues.
    const slotRedis = config.redis
      ? createRequestPathRedis(config.redis, logger, {
          name: 'issuer-slots',
          commandTimeoutMs: config.redisCommandTimeoutMs,
          // No auto-pipelining: the slot store already sends a tenant's reservations together,
          // and auto-pipelining would hold each call back to the next setImmediate (measured:
          // about 5 % fewer credentials per second with it).
          enableAutoPipelining: false,
        })
      : null;
    if (slotRedis) redis.push(slotRedis);
    const database = await createDatabase<IssuerDatabase>(config.database, 'issuer', logger);
    return new IssuerService({
      config,
      logger,
      clock: overrides.clock ?? systemClock,
      database,
      bus: bus ?? new MemoryBus(),
      ownsBus: overrides.bus === undefined,
      scheduler: scheduler ?? new MemoryScheduler(logger),
      redis,
      slotRedis,
      slotStore: overrides.slotStore,
      sign: overrides.sign,
    });
  }

  /**
   * Applies migrations (safe with concurrent replicas), checks the KEK, runs a first
   * maintenance tick (creating the first keys on an empty database), loads the key cache,
   * follows key changes, schedules maintenance and starts serving.
   */
  async start(): Promise<void> {
    const applied = await this.database.migrate(migrations);
    if (applied.length) this.logger.info({ applied }, 'migrations applied');
    await this.#assertKek();
    // Subscribed before the first tick, so no change made meanwhile goes unnoticed.
    this.#unsubscribe = await this.bus.subscribe(SIGNING_KEYS_CHANGED_CHANNEL, () => {
      this.reload('bus').catch(() => {});
    });
    await this.tick();
    await this.relayDirectory.start();
    await this.credentials.start();
    if (this.#slotRedis && !(await waitReady(this.#slotRedis, 2_000))) {
      this.logger.warn('redis is not reachable yet: credential issuance answers unavailable until it is');
    }
    // The bus delivers at most once; a timer bounds how long a lost message can matter.
    const intervalMs = this.config.keys.maintenanceIntervalSeconds * 1000;
    this.#refreshTimer = setInterval(() => this.reload('refresh').catch(() => {}), intervalMs);
    this.#refreshTimer.unref();
    this.scheduler.every(KEY_MAINTENANCE_JOB, intervalMs, async () => {
      await this.tick();
    });
    await this.scheduler.start();
    const watch = watchDatabase(this.rpc.health, [IssuerRpc.typeName], this.database, this.logger);
    this.#watch = watch;
    await watch.check();
    const port = await this.rpc.listen(this.config.listen);
    this.logger.info({ port, activeKid: this.keyRing.activeKey()?.kid }, 'issuer listening');
    if (this.config.metricsAddress !== undefined) {
      this.#metricsServer = await serveMetrics(this.config.metricsAddress, this.metrics, this.logger);
    }
  }

  get port(): number {
    return this.rpc.port;
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.#metricsServer?.port;
  }

  /** The published key set, from memory: keys, exact body and strong ETag. */
  jwks(): JwksDocument {
    return this.keyRing.jwks();
  }

  /** The key that signs now (cached KeyObject). Throws before `start`. */
  activeSigningKey(): ActiveSigningKey {
    const active = this.keyRing.activeKey();
    if (!active) throw new Error('issuer not started: no active signing key loaded');
    return active;
  }

  /**
   * One maintenance tick at the clock's current time (the scheduled job calls this). When
   * it changed anything, tells every replica; then reloads this replica's cache.
   */
  async tick(): Promise<MaintenanceResult> {
    return this.#afterMaintenance(await this.maintenance.run(this.clock.now()));
  }

  /** Records an on-demand rotation and runs a tick at once. */
  async rotate(requestedBy: string): Promise<MaintenanceResult> {
    return this.#afterMaintenance(await this.maintenance.run(this.clock.now(), { requestedBy }));
  }

  async #afterMaintenance(result: MaintenanceResult): Promise<MaintenanceResult> {
    if (result.changed) {
      await this.bus.publish(SIGNING_KEYS_CHANGED_CHANNEL, this.clock.now().toISOString()).catch((err) => {
        this.logger.warn(
          { err: { message: (err as Error).message } },
          'could not announce the key change; replicas pick it up on their next refresh',
        );
      });
    }
    await this.reload('tick');
    return result;
  }

  /** Every key (removed ones too) in listing order, plus the pending rotation request. */
  async listSigningKeys(): Promise<SigningKeyListing> {
    const [keys, request] = await Promise.all([this.store.list(), this.store.rotationRequest()]);
    return { keys: keys.sort(compareKeys), rotationPendingSince: request?.requestedAt ?? null };
  }

  /**
   * Decrypts a stored private key (undefined once removed). In-process only — never
   * served over RPC; tests use it to prove what is and is not stored.
   */
  async privateKey(kid: string): Promise<KeyObject | undefined> {
    const key = await this.store.get(kid);
    if (!key?.sealed) return undefined;
    return openPrivateKey(key.sealed, this.config.kek, key.kid, key.x);
  }

  /** Listens to every cache reload; returns a function that stops listening. */
  onKeysReloaded(listener: (event: KeysReloadedEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Rebuilds the in-memory key set from the database (reloads never overlap). */
  reload(reason: KeysReloadReason): Promise<void> {
    const run = this.#reloadChain.then(async () => {
      try {
        const changed = this.keyRing.load(await this.store.listLive());
        if (changed) {
          this.logger.info({ reason, activeKid: this.keyRing.activeKey()?.kid }, 'signing key set reloaded');
        }
        const event = { reason, changed, jwks: this.keyRing.jwks() };
        for (const listener of this.#listeners) listener(event);
      } catch (err) {
        this.logger.error({ err, reason }, 'could not reload the signing keys');
        throw err;
      }
    });
    this.#reloadChain = run.catch(() => {});
    return run;
  }

  async #assertKek(): Promise<void> {
    const configured = kekFingerprint(this.config.kek);
    const stored = (await this.store.kekFingerprints()).filter((f) => f !== configured);
    if (stored.length) {
      throw new ConfigError(
        'RELAYPLANE_KEK',
        `does not match the key-encryption key that sealed the stored signing keys (stored key fingerprint ${stored.join(', ')}, configured ${configured}); start with the key they were created with`,
      );
    }
  }

  async destroy(): Promise<void> {
    clearInterval(this.#refreshTimer);
    this.#watch?.stop();
    await this.#unsubscribe?.().catch(() => {});
    await this.scheduler.close();
    // Long-polls answer at once, so draining the server does not wait out their wait_ms.
    await this.credentials.stop();
    await this.rpc.close();
    await this.credentialWriter.flushed();
    await this.relayDirectory.stop();
    await this.slots.close().catch(() => {});
    await this.#reloadChain;
    if (this.#ownsBus) await this.bus.close();
    for (const connection of this.#redis) connection.disconnect();
    await this.database.destroy();
    // Last: metrics stay scrapable while the service drains.
    await this.#metricsServer?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}
