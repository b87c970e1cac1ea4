/**
 * Billing's composition root: the one place its dependencies are built (database, Redis, bus,
 * scheduler, clients, audit outbox, provider, throttles, usage job, gRPC server and handlers)
 * and their closers registered, in build order, on one Lifecycle. `BillingService` only starts
 * and stops.
 */

import { SERVICES } from '@relayplane/contract/contract';
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
import { connectCoordination } from '@relayplane/shared/coordination';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { grpcTls } from '@relayplane/shared/grpc-tls';
import { Lifecycle } from '@relayplane/shared/lifecycle';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { counter, createRegistry, type Registry } from '@relayplane/shared/metrics';
import { serviceHealthMetrics } from '@relayplane/shared/metrics-health';
import { createRateLimiter, type RateLimiter } from '@relayplane/shared/rate-limit';
import { createRequestPathRedis } from '@relayplane/shared/redis';
import { connect, RpcServer, type ServiceClient } from '@relayplane/shared/rpc';
import { MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import { Serving } from '@relayplane/shared/serving';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type Stripe from 'stripe';
import type { BillingConfig } from './config.ts';
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

export interface BillingOverrides {
  logger?: Logger;
  clock?: Clock;
  /** Shared with other services (embedded mode); the caller closes it. */
  bus?: Bus;
  /** Given to this service alone: the usage job registers on it; the service starts and closes it. */
  scheduler?: Scheduler;
  /** An issuer client instead of connecting to `config.issuerAddress` (not closed here). */
  issuer?: ServiceClient<typeof IssuerRpc>;
  /** An admin client instead of connecting to `config.adminAddress` (not closed here). */
  admin?: AuditAdminClient;
}

/** Redis as billing uses it; undefined without `BILLING_REDIS_URL`. */
interface RedisSetup {
  keys: RedisKeys;
  /** The checkout throttle's connection (request path: short timeouts, never queues). */
  throttle: Redis;
}

export class BillingContext {
  readonly lifecycle: Lifecycle;
  readonly config: BillingConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly database: Database<BillingDatabase>;
  /** Undefined without `BILLING_REDIS_URL`. */
  readonly redis: RedisSetup | undefined;
  readonly bus: Bus;
  readonly scheduler: Scheduler;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics: Registry;
  readonly rpc: RpcServer;
  readonly serving: Serving;
  /** Audit events of this service's changes, delivered to admin (docs/audit.md). */
  readonly audit: AuditOutbox;
  readonly provider: BillingProvider;
  /** Per-tenant checkout throttle (Redis with a per-process fallback, or memory alone). */
  readonly checkoutThrottle: RateLimiter;
  readonly usage: UsageAggregation;

  private constructor(fields: Omit<BillingContext, 'close'>) {
    this.lifecycle = fields.lifecycle;
    this.config = fields.config;
    this.logger = fields.logger;
    this.clock = fields.clock;
    this.database = fields.database;
    this.redis = fields.redis;
    this.bus = fields.bus;
    this.scheduler = fields.scheduler;
    this.metrics = fields.metrics;
    this.rpc = fields.rpc;
    this.serving = fields.serving;
    this.audit = fields.audit;
    this.provider = fields.provider;
    this.checkoutThrottle = fields.checkoutThrottle;
    this.usage = fields.usage;
  }

  static async fromConfig(config: BillingConfig, overrides: BillingOverrides = {}): Promise<BillingContext> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: SERVICES.billing });
    const clock = overrides.clock ?? systemClock;
    const lifecycle = new Lifecycle(logger);
    return lifecycle.build(async () => {
      // First registered, so closed last: metrics stay scrapable while the service drains.
      let serving: Serving | undefined;
      lifecycle.onClose('metrics listener', () => serving?.closeMetrics());
      const database = lifecycle.use(
        'database',
        await createDatabase<BillingDatabase>(config.database, SERVICES.billing, logger),
        (d) => d.destroy(),
      );
      const { redis, bus, scheduler } = connectRedis(config, overrides, logger, lifecycle);
      const tls = grpcTls(config.grpcTls, logger);
      const issuer =
        overrides.issuer ??
        lifecycle.use(
          'issuer client',
          connect(IssuerRpc, config.issuerAddress, { tls: tls?.client(SERVICES.issuer) }),
          (c) => c.close(),
        );
      const admin =
        overrides.admin ??
        lifecycle.use(
          'admin client',
          connect(AdminRpc, config.adminAddress, { tls: tls?.client(SERVICES.admin) }),
          (c) => c.close(),
        );
      const metrics = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
      const db = database.db;
      const audit = lifecycle.use(
        'audit outbox',
        new AuditOutbox({
          db: db as unknown as Kysely<AuditOutboxDatabase>,
          source: SERVICES.billing,
          admin,
          logger,
          metrics,
        }),
        // Rows it did not deliver stay in the outbox for another replica or the next start.
        (a) => a.stop(),
      );
      lifecycle.use('scheduler', scheduler, (s) => s.close());
      const throttle = (purpose: string, windowMs: number) =>
        createRateLimiter(
          redis && { connection: redis.throttle, prefix: redis.keys.throttle },
          windowMs,
          clock,
          logger,
          purpose,
        );
      const checkoutThrottle = throttle('checkout throttle', config.checkout.windowSeconds * 1000);
      const planChanges = new PlanChanges({ db, bus, clock, logger, audit });
      const { provider, stripe } = billingProvider(config, logger);
      // Registered whatever the provider, so dashboards and alerts find it (0 without Stripe).
      const badSignatureCounter = counter(metrics, {
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
              audit,
              badSignatures: new BadSignatures({
                limiter: throttle('webhook signature refusals', 2 * BAD_SIGNATURE_WINDOW_MS),
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
      const usage = lifecycle.use(
        'usage aggregation',
        new UsageAggregation({
          db,
          issuer,
          scheduler,
          clock,
          logger,
          intervalMs: config.usageIntervalMs,
          ...(meter ? { report: meter.report } : {}),
        }),
        (u) => u.stop(),
      );
      const rpc = lifecycle.use(
        'gRPC server',
        new RpcServer(logger, {
          maxConnectionAgeMs: config.maxConnectionAgeMs,
          metrics,
          tls,
          healthListen: config.healthListen,
        }),
        (r) => r.close(),
      );
      serving = new Serving({
        rpc,
        serviceName: BillingRpc.typeName,
        database,
        listen: config.listen,
        metrics,
        metricsAddress: config.metricsAddress,
        logger,
        name: SERVICES.billing,
      });
      // Last registered, so closed first: not ready any more, and start() stops waiting.
      lifecycle.use('serving', serving, (s) => s.stop());
      serviceHealthMetrics(metrics, {
        health: rpc.health,
        services: [BillingRpc.typeName],
        database,
        redis: redis?.throttle,
      });
      const handlers = billingHandlers({
        plans: config.plans,
        subscriptions: new SubscriptionStore(db),
        planChanges,
        checkoutSessions: new CheckoutSessionStore(db),
        provider,
        builtinPaidCheckout: config.provider.kind === 'builtin' && config.provider.paidCheckout,
        checkoutThrottle,
        checkout: config.checkout,
        stripeWebhooks,
        usage: new UsageStore(db),
        clock,
        logger,
        audit,
        recordAlone: async (event) => {
          await audit.enqueue(db, event);
          audit.kick();
        },
      });
      rpc.add(BillingRpc, serving.guard(BillingRpc, handlers));
      return new BillingContext({
        lifecycle,
        config,
        logger,
        clock,
        database,
        redis,
        bus,
        scheduler,
        metrics,
        rpc,
        serving,
        audit,
        provider,
        checkoutThrottle,
        usage,
      });
    });
  }

  /** Closes everything, the last built first. */
  close(): Promise<void> {
    return this.lifecycle.close();
  }
}

/** The throttle's connection, and the bus and scheduler on Redis (unless given); memory without Redis. */
function connectRedis(
  config: BillingConfig,
  overrides: BillingOverrides,
  logger: Logger,
  lifecycle: Lifecycle,
): { redis: RedisSetup | undefined; bus: Bus; scheduler: Scheduler } {
  let { bus, scheduler } = overrides;
  let redis: RedisSetup | undefined;
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
    lifecycle.onClose('redis', () => {
      for (const connection of [throttle, ...shared.connections]) connection.disconnect();
    });
    ({ bus, scheduler } = shared);
    redis = { keys, throttle };
  } else if (!overrides.bus) {
    logger.warn(
      'no BILLING_REDIS_URL: plan changes are announced in this process only and the checkout throttle is per process',
    );
  }
  if (!overrides.bus) {
    bus ??= new MemoryBus();
    lifecycle.use('bus', bus, (b) => b.close());
  }
  return { redis, bus: bus as Bus, scheduler: scheduler ?? new MemoryScheduler(logger) };
}

function billingProvider(
  config: BillingConfig,
  logger: Logger,
): { provider: BillingProvider; stripe: Stripe | undefined } {
  if (config.provider.kind === 'stripe') {
    const stripe = createStripeClient(config.provider);
    return { provider: new StripeProvider(stripe), stripe };
  }
  if (config.provider.paidCheckout) {
    logger.warn(
      'BILLING_BUILTIN_PAID_CHECKOUT is on: the built-in provider takes no payment, so anyone who can sign up can move their tenant to any paid plan',
    );
  }
  return { provider: new BuiltinProvider(), stripe: undefined };
}
