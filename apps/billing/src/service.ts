import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { IssuerService as IssuerRpc } from '@relayplane/proto/issuer';
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
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { counter, createRegistry, type Registry, serviceHealthMetrics } from '@relayplane/shared/metrics';
import { createRateLimiter, type RateLimiter } from '@relayplane/shared/rate-limit';
import { createRequestPathRedis, waitReady } from '@relayplane/shared/redis';
import { connect, RpcServer, type ServiceClient } from '@relayplane/shared/rpc';
import { MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import { Serving } from '@relayplane/shared/serving';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type Stripe from 'stripe';
import type { BillingConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';
import type { BillingDatabase } from './db/schema.ts';
import { billingHandlers } from './grpc/billing-handlers.ts';
import { UsageAggregation } from './jobs/usage-aggregation.ts';
import { BAD_SIGNATURE_WINDOW_MS, BadSignatures } from './providers/bad-signatures.ts';
import { type BillingProvider, BuiltinProvider } from './providers/provider.ts';
import { createStripeClient, StripeProvider } from './providers/stripe.ts';
import { hasMeteredPlan, StripeMeterReporter } from './providers/stripe-meter.ts';
import { StripeWebhooks } from './providers/stripe-webhooks.ts';
import { type RedisKeys, redisKeys } from './redis/keys.ts';
import { CheckoutSessionStore } from './stores/checkout-sessions.ts';
import { PlanChanges } from './stores/plan-changes.ts';
import { SubscriptionStore } from './stores/subscriptions.ts';
import { UsageStore } from './stores/usage-daily.ts';

const SCHEDULER_QUEUE = 'billing-jobs';
/** How long start() waits for the throttle's Redis; past it, the per-process limit answers until Redis does. */
const THROTTLE_READY_WAIT_MS = 1_000;

export interface BillingOverrides {
  logger?: Logger;
  clock?: Clock;
  /** Shared with other services (embedded mode); the caller closes it. */
  bus?: Bus;
  /** Given to this service alone: the usage job registers on it; the service starts and closes it. */
  scheduler?: Scheduler;
  /** An issuer client instead of connecting to `config.issuerAddress` (not closed by destroy). */
  issuer?: ServiceClient<typeof IssuerRpc>;
  /** An admin client instead of connecting to `config.adminAddress` (not closed by destroy). */
  admin?: AuditAdminClient;
}

/** Redis as this service uses it; undefined without `BILLING_REDIS_URL`. */
interface RedisSetup {
  keys: RedisKeys;
  /** The checkout throttle's connection (request path: short timeouts, never queues). */
  throttle: Redis;
  /** Every connection this service opened, closed by destroy. */
  connections: Redis[];
}

/** The billing service: plans, prices, subscriptions, entitlements, checkout, usage. */
export class BillingService {
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
  /** Closed by destroy; undefined when the caller passed its own (`overrides.admin`). */
  readonly #ownAdmin: ServiceClient<typeof AdminRpc> | undefined;
  readonly #ownsBus: boolean;
  readonly #redis: RedisSetup | undefined;
  readonly #issuer: ServiceClient<typeof IssuerRpc>;
  readonly #ownsIssuer: boolean;
  readonly #serving: Serving;

  private constructor(deps: {
    config: BillingConfig;
    logger: Logger;
    database: Database<BillingDatabase>;
    clock: Clock;
    bus: Bus;
    ownsBus: boolean;
    scheduler: Scheduler;
    redis: RedisSetup | undefined;
    issuer: ServiceClient<typeof IssuerRpc> | undefined;
    admin: AuditAdminClient | undefined;
  }) {
    const { config, logger, database, clock, redis } = deps;
    const db = database.db;
    this.config = config;
    this.logger = logger;
    this.database = database;
    this.bus = deps.bus;
    this.#ownsBus = deps.ownsBus;
    this.scheduler = deps.scheduler;
    this.#redis = redis;
    this.#ownsIssuer = deps.issuer === undefined;
    const tls = grpcTls(config.grpcTls, logger);
    this.#issuer =
      deps.issuer ?? connect(IssuerRpc, config.issuerAddress, { tls: tls?.client(SERVICES.issuer) });
    this.metrics = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
    let admin = deps.admin;
    if (!admin) {
      this.#ownAdmin = connect(AdminRpc, config.adminAddress, { tls: tls?.client(SERVICES.admin) });
      admin = this.#ownAdmin;
    }
    this.audit = new AuditOutbox({
      db: db as unknown as Kysely<AuditOutboxDatabase>,
      source: SERVICES.billing,
      admin,
      logger,
      metrics: this.metrics,
    });
    this.rpc = new RpcServer(logger, {
      maxConnectionAgeMs: config.maxConnectionAgeMs,
      metrics: this.metrics,
      tls,
      healthListen: config.healthListen,
    });
    this.#serving = new Serving({
      rpc: this.rpc,
      serviceName: BillingRpc.typeName,
      database,
      listen: config.listen,
      metrics: this.metrics,
      metricsAddress: config.metricsAddress,
      logger,
      name: SERVICES.billing,
    });
    serviceHealthMetrics(this.metrics, {
      health: this.rpc.health,
      services: [BillingRpc.typeName],
      database,
      redis: redis?.throttle,
    });

    this.checkoutThrottle = createRateLimiter(
      redis && { connection: redis.throttle, prefix: redis.keys.throttle },
      config.checkout.windowSeconds * 1000,
      clock,
      logger,
      'checkout throttle',
    );

    const planChanges = new PlanChanges({ db, bus: this.bus, clock, logger, audit: this.audit });
    let stripe: Stripe | undefined;
    if (config.provider.kind === 'stripe') {
      stripe = createStripeClient(config.provider);
      this.provider = new StripeProvider(stripe);
    } else {
      this.provider = new BuiltinProvider();
      if (config.provider.paidCheckout) {
        logger.warn(
          'BILLING_BUILTIN_PAID_CHECKOUT is on: the built-in provider takes no payment, so anyone who can sign up can move their tenant to any paid plan',
        );
      }
    }
    // Registered whatever the provider, so dashboards and alerts find it (0 without Stripe).
    const badSignatureCounter = counter(this.metrics, {
      name: 'relayplane_billing_webhook_bad_signatures_total',
      help: 'Provider webhooks refused for a bad signature (each; audit events are one per client and 15-minute window).',
    });
    const stripeWebhooks =
      stripe && config.provider.kind === 'stripe'
        ? new StripeWebhooks({
            stripe,
            secret: config.provider.webhookSecret,
            toleranceSeconds: config.provider.webhookToleranceSeconds,
            db,
            plans: config.plans,
            planChanges,
            clock,
            logger,
            audit: this.audit,
            badSignatures: new BadSignatures({
              limiter: createRateLimiter(
                redis && { connection: redis.throttle, prefix: redis.keys.throttle },
                2 * BAD_SIGNATURE_WINDOW_MS,
                clock,
                logger,
                'webhook signature refusals',
              ),
              clock,
              ipv6Prefix: config.throttleIpv6Prefix,
              counter: badSignatureCounter,
            }),
          })
        : undefined;
    // Metered usage goes to Stripe only with the Stripe provider and a plan that has a meter;
    // the built-in provider ignores `stripe_meter_event_name` (there is no one to bill).
    const meter =
      stripe && hasMeteredPlan(config.plans)
        ? new StripeMeterReporter({ stripe, db, plans: config.plans, clock, logger })
        : undefined;
    if (!stripe && hasMeteredPlan(config.plans)) {
      logger.warn(
        'the plans file sets stripe_meter_event_name, but BILLING_PROVIDER is not stripe: no metered usage is reported',
      );
    }
    this.usage = new UsageAggregation({
      db,
      issuer: this.#issuer,
      scheduler: this.scheduler,
      clock,
      logger,
      intervalMs: config.usageIntervalMs,
      ...(meter ? { report: meter.report } : {}),
    });
    const handlers = billingHandlers({
      plans: config.plans,
      subscriptions: new SubscriptionStore(db),
      planChanges,
      checkoutSessions: new CheckoutSessionStore(db),
      provider: this.provider,
      builtinPaidCheckout: config.provider.kind === 'builtin' && config.provider.paidCheckout,
      checkoutThrottle: this.checkoutThrottle,
      checkout: config.checkout,
      stripeWebhooks,
      usage: new UsageStore(db),
      clock,
      logger,
      audit: this.audit,
      recordAlone: async (event) => {
        await this.audit.enqueue(db, event);
        this.audit.kick();
      },
    });
    this.rpc.add(BillingRpc, this.#serving.guard(BillingRpc, handlers));
  }

  static async create(config: BillingConfig, overrides: BillingOverrides = {}): Promise<BillingService> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: SERVICES.billing });
    let redis: RedisSetup | undefined;
    let bus = overrides.bus;
    let scheduler = overrides.scheduler;
    if (config.redis) {
      const keys = redisKeys(config.redis.prefix);
      const throttle = createRequestPathRedis(config.redis, logger, {
        name: 'billing-throttle',
        commandTimeoutMs: config.redisCommandTimeoutMs,
      });
      const shared = connectCoordination(config.redis, logger, {
        name: SERVICES.billing,
        busPrefix: keys.bus,
        queue: { name: SCHEDULER_QUEUE, prefix: keys.bull },
        bus,
        scheduler,
      });
      ({ bus, scheduler } = shared);
      redis = { keys, throttle, connections: [throttle, ...shared.connections] };
    } else if (!overrides.bus) {
      logger.warn(
        'no BILLING_REDIS_URL: plan changes are announced in this process only and the checkout throttle is per process',
      );
    }
    const database = await createDatabase<BillingDatabase>(config.database, SERVICES.billing, logger);
    return new BillingService({
      config,
      logger,
      database,
      clock: overrides.clock ?? systemClock,
      bus: bus ?? new MemoryBus(),
      ownsBus: overrides.bus === undefined,
      scheduler: scheduler ?? new MemoryScheduler(logger),
      redis,
      issuer: overrides.issuer,
      admin: overrides.admin,
    });
  }

  /**
   * Listens at once (alive, not ready: see serving.ts), applies the migrations (safe with
   * concurrent replicas; retried until PostgreSQL answers), schedules usage aggregation (which
   * begins once Redis answers). Resolves once ready.
   */
  async start(): Promise<void> {
    const serving = this.#serving;
    await serving.listen();
    await serving.step('migrations', async () => {
      const applied = await this.database.migrate(migrations);
      if (applied.length) this.logger.info({ applied }, 'migrations applied');
    });
    // Delivers what earlier runs left, and from now on what this one writes (admin may be away).
    this.audit.start();
    await this.usage.start();
    await this.scheduler.start();
    if (this.#redis && !(await waitReady(this.#redis.throttle, THROTTLE_READY_WAIT_MS))) {
      this.logger.warn('redis is not reachable yet: the checkout throttle is per process until it is');
    }
    await serving.ready({ provider: this.provider.name });
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
    await this.rpc.close();
    await this.usage.stop();
    await this.scheduler.close();
    // Rows it did not deliver stay in the outbox for another replica or the next start.
    await this.audit.stop();
    this.#ownAdmin?.close();
    if (this.#ownsIssuer) this.#issuer.close();
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
