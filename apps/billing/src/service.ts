import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { type Clock, systemClock } from '@relayplane/shared/clock';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type MetricsServer, type Registry, serveMetrics } from '@relayplane/shared/metrics';
import { watchDatabase } from '@relayplane/shared/readiness';
import { RpcServer } from '@relayplane/shared/rpc';
import type { BillingConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';
import type { BillingDatabase } from './db/schema.ts';
import { billingHandlers } from './grpc/billing-handlers.ts';
import { SubscriptionStore } from './stores/subscriptions.ts';

export interface BillingOverrides {
  logger?: Logger;
  clock?: Clock;
}

/** The billing service: plans, prices, subscriptions. */
export class BillingService {
  readonly config: BillingConfig;
  readonly logger: Logger;
  readonly database: Database<BillingDatabase>;
  readonly rpc: RpcServer;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics: Registry;
  #metricsServer: MetricsServer | undefined;
  #watch: { stop: () => void } | undefined;

  private constructor(
    config: BillingConfig,
    logger: Logger,
    database: Database<BillingDatabase>,
    clock: Clock,
  ) {
    this.config = config;
    this.logger = logger;
    this.database = database;
    this.metrics = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
    this.rpc = new RpcServer(logger, {
      maxConnectionAgeMs: config.maxConnectionAgeMs,
      metrics: this.metrics,
    });
    this.rpc.add(
      BillingRpc,
      billingHandlers({ plans: config.plans, subscriptions: new SubscriptionStore(database.db), clock }),
    );
  }

  static async create(config: BillingConfig, overrides: BillingOverrides = {}): Promise<BillingService> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: 'billing' });
    const database = await createDatabase<BillingDatabase>(config.database, 'billing', logger);
    return new BillingService(config, logger, database, overrides.clock ?? systemClock);
  }

  /** Applies migrations (safe with concurrent replicas), starts serving; returns the bound port. */
  async start(): Promise<void> {
    const applied = await this.database.migrate(migrations);
    if (applied.length) this.logger.info({ applied }, 'migrations applied');
    const watch = watchDatabase(this.rpc.health, [BillingRpc.typeName], this.database, this.logger);
    this.#watch = watch;
    await watch.check();
    const port = await this.rpc.listen(this.config.listen);
    this.logger.info({ port }, 'billing listening');
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

  async destroy(): Promise<void> {
    this.#watch?.stop();
    await this.rpc.close();
    await this.database.destroy();
    // Last: metrics stay scrapable while the service drains.
    await this.#metricsServer?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}
