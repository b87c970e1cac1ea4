/**
 * Admin's composition root: the one place its dependencies are built (database, Redis, bus,
 * scheduler, the billing client, stores, the audit trail and its checkpoints, throttles, the
 * gRPC server and handlers) and their closers registered, in build order, on one Lifecycle.
 * `AdminService` only starts and stops.
 */

import { lookup } from 'node:dns/promises';
import { SERVICES } from '@relayplane/contract/contract';
import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { type Bus, MemoryBus } from '@relayplane/shared/bus';
import { type Clock, systemClock } from '@relayplane/shared/clock';
import { connectCoordination } from '@relayplane/shared/coordination';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { grpcTls } from '@relayplane/shared/grpc-tls';
import { Lifecycle } from '@relayplane/shared/lifecycle';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type Registry } from '@relayplane/shared/metrics';
import { serviceHealthMetrics } from '@relayplane/shared/metrics-health';
import { createRateLimiter, type RateLimiter } from '@relayplane/shared/rate-limit';
import { createRedis, createRequestPathRedis } from '@relayplane/shared/redis';
import { connect, RpcServer, type ServiceClient } from '@relayplane/shared/rpc';
import { MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import { Serving } from '@relayplane/shared/serving';
import { BullmqDeliveryQueue, MemoryDeliveryQueue } from '@relayplane/shared/webhook-queue';
import type { Resolve } from '@relayplane/shared/webhook-target';
import type { Redis } from 'ioredis';
import { AuditSigningKey } from './audit/checkpoint-key.ts';
import { AuditCheckpoints } from './audit/checkpoints.ts';
import { AuditTrail } from './audit/trail.ts';
import type { AdminConfig } from './config.ts';
import type { AdminDatabase } from './db/schema.ts';
import { adminHandlers } from './grpc/admin-handlers.ts';
import { TotpResealer } from './jobs/reseal-totp-secrets.ts';
import { ExpirySweep } from './jobs/sweep-expired.ts';
import { adminMetrics } from './metrics.ts';
import { SecretSealer, WEBHOOK_SECRET_HKDF_INFO } from './mfa/sealing.ts';
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
import { WebhookDeliveryStore } from './webhooks/delivery-store.ts';
import { WebhookEndpointStore } from './webhooks/endpoint-store.ts';
import { Webhooks } from './webhooks/webhooks.ts';

const QUEUE_NAME = 'admin-maintenance';

export interface AdminOverrides {
  logger?: Logger;
  clock?: Clock;
  /** A billing client to use instead of connecting to `config.billingAddress` (not closed here). */
  billing?: ServiceClient<typeof BillingRpc>;
  /**
   * The bus revoked API keys are announced on, instead of one built from `config.redis`
   * (embedded mode passes its shared in-process bus). It belongs to the caller: not closed here.
   */
  bus?: Bus;
  /** The password hasher (tests hold a verification open to race it); default argon2id. */
  passwords?: PasswordHasher;
  /** How webhook URLs resolve (tests name hosts without DNS); default node:dns. */
  webhookResolve?: Resolve;
}

type Fields = Omit<AdminContext, 'close'>;

export class AdminContext {
  readonly lifecycle!: Lifecycle;
  readonly config!: AdminConfig;
  readonly logger!: Logger;
  readonly clock!: Clock;
  readonly database!: Database<AdminDatabase>;
  readonly passwords!: PasswordHasher;
  /** Where revoked API keys are announced (`BUS_CHANNELS.apiKeysRevoked`). */
  readonly bus!: Bus;
  /** Admin's maintenance jobs (audit checkpoints and retention): bullmq with Redis, timers without. */
  readonly scheduler!: Scheduler;
  /** The throttles' connection (login, sign-up, device flow); undefined without Redis. */
  readonly throttleRedis!: Redis | undefined;
  readonly billing!: ServiceClient<typeof BillingRpc>;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics!: Registry;
  readonly rpc!: RpcServer;
  readonly serving!: Serving;
  readonly accounts!: AccountStore;
  readonly sessions!: SessionStore;
  readonly apiKeys!: ApiKeyStore;
  /** The audit trail (docs/audit.md). */
  readonly audit!: AuditTrail;
  /** Signed checkpoints of its chains (docs/audit.md, "Signed checkpoints"). */
  readonly checkpoints!: AuditCheckpoints;
  /** Counts login attempts (per account, per client IP, per account and client IP). */
  readonly loginThrottle!: RateLimiter;
  /** Re-seals second-factor secrets under the current KEK after a rotation (at start, then hourly). */
  readonly totpResealer!: TotpResealer;
  /** Deletes expired sessions, device grants and login challenges (at start, then every 10 minutes). */
  readonly expirySweep!: ExpirySweep;
  /** Webhook fan-out, dispatcher and senders (issue 34); started by the service. */
  readonly webhooks!: Webhooks;
  readonly webhookDeliveries!: WebhookDeliveryStore;

  private constructor(fields: Fields) {
    Object.assign(this, fields);
  }

  static async fromConfig(config: AdminConfig, overrides: AdminOverrides = {}): Promise<AdminContext> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: SERVICES.admin });
    const clock = overrides.clock ?? systemClock;
    const lifecycle = new Lifecycle(logger);
    return lifecycle.build(async () => {
      const passwords = overrides.passwords ?? (await createPasswordHasher());
      // First registered, so closed last: metrics stay scrapable while the service drains.
      let serving: Serving | undefined;
      lifecycle.onClose('metrics listener', () => serving?.closeMetrics());
      const database = lifecycle.use(
        'database',
        await createDatabase<AdminDatabase>(config.database, SERVICES.admin, logger),
        (d) => d.destroy(),
      );
      const db = database.db;
      const throttleRedis =
        config.redis &&
        lifecycle.use(
          'redis (throttles)',
          createRequestPathRedis(config.redis, logger, { name: 'admin-throttle', commandTimeoutMs: 500 }),
          (r) => r.disconnect(),
        );
      const throttle =
        throttleRedis && config.redis
          ? { connection: throttleRedis, prefix: config.redis.prefix }
          : undefined;
      const { bus, scheduler } = connectBus(config, overrides.bus, logger, lifecycle);
      const tls = grpcTls(config.grpcTls, logger);
      const billing =
        overrides.billing ??
        lifecycle.use(
          'billing client',
          connect(BillingRpc, config.billingAddress, { tls: tls?.client(SERVICES.billing) }),
          (c) => c.close(),
        );
      const metrics = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
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
      lifecycle.use('scheduler', scheduler, (s) => s.close());
      const limiter = (windowSeconds: number, purpose: string) =>
        createRateLimiter(throttle, windowSeconds * 1000, clock, logger, purpose);
      const accounts = new AccountStore(db);
      const sessions = new SessionStore(db);
      const apiKeys = new ApiKeyStore(db);
      const audit = new AuditTrail(db, clock, logger);
      const deviceGrants = new DeviceGrantStore(db);
      const loginChallenges = new LoginChallengeStore(db);
      const loginThrottle = limiter(config.loginLimits.windowSeconds, 'login throttle');
      const secondFactors = new SecondFactorStore(db);
      const checkpoints = new AuditCheckpoints(
        db,
        config.auditSigningKeyFile
          ? AuditSigningKey.fromFile(config.auditSigningKeyFile)
          : AuditSigningKey.fromKek(config.kek),
        logger,
      );
      const sealer = new SecretSealer(config.kek, config.kekPrevious);
      const totpResealer = lifecycle.use(
        'TOTP resealer',
        new TotpResealer({
          store: secondFactors,
          sealer,
          logger,
          report: adminMetrics(metrics).totpSecretsNotUnderKek,
        }),
        (t) => t.stop(),
      );
      const webhookEndpoints = new WebhookEndpointStore(db);
      const webhookDeliveries = new WebhookDeliveryStore(db);
      const webhookRedis =
        config.redis &&
        lifecycle.use('redis (webhooks)', createRedis(config.redis, logger, 'admin-webhooks'), (r) =>
          r.disconnect(),
        );
      const webhookResolve: Resolve =
        overrides.webhookResolve ?? ((host) => lookup(host, { all: true, verbatim: true }));
      const webhooks = lifecycle.use(
        'webhooks',
        new Webhooks({
          db,
          endpoints: webhookEndpoints,
          deliveries: webhookDeliveries,
          sealer: new SecretSealer(config.kek, config.kekPrevious, WEBHOOK_SECRET_HKDF_INFO),
          audit,
          clock,
          logger,
          queue:
            webhookRedis && config.redis
              ? new BullmqDeliveryQueue(
                  webhookRedis,
                  bullPrefix(config.redis.prefix),
                  config.webhooks.concurrency,
                  logger,
                )
              : new MemoryDeliveryQueue(config.webhooks.concurrency, logger),
          settings: config.webhooks,
          metrics,
          resolve: webhookResolve,
        }),
        (w) => w.close(),
      );
      audit.onAppended((trx, event) => webhooks.onAuditEvent(trx, event));
      const expirySweep = lifecycle.use(
        'expiry sweep',
        new ExpirySweep({ sessions, deviceGrants, loginChallenges, clock, logger }),
        (s) => s.stop(),
      );
      serving = new Serving({
        rpc,
        serviceName: AdminRpc.typeName,
        database,
        listen: config.listen,
        metrics,
        metricsAddress: config.metricsAddress,
        logger,
        name: SERVICES.admin,
      });
      // Last registered, so closed first: not ready any more, and start() stops waiting.
      lifecycle.use('serving', serving, (s) => s.stop());
      serviceHealthMetrics(metrics, {
        health: rpc.health,
        services: [AdminRpc.typeName],
        database,
        redis: throttleRedis,
      });
      const handlers = adminHandlers({
        audit,
        checkpoints,
        accounts,
        sessions,
        projects: new ProjectStore(db),
        apiKeys,
        allowlist: new AllowlistStore(db),
        webhookEndpoints,
        webhookDeliveries,
        webhooks,
        webhookSettings: config.webhooks,
        webhookResolve,
        bots: new BotStore(db, config.perBotLimits.maxActiveKeys),
        identityTokens: new IdentityTokenStore(db, config.perBotLimits.maxActiveIdentityTokens),
        passwords,
        billing,
        bus,
        clock,
        logger,
        metrics: adminMetrics(metrics),
        loginThrottle,
        loginLimits: config.loginLimits,
        loginSlowdown: limiter(config.loginLimits.slowSeconds, 'login slowdown'),
        deviceTokens: new DeviceTokens(config.kek),
        secondFactor: new SecondFactors({
          store: secondFactors,
          sealer,
          clock,
          throttle: loginThrottle,
          maxAttempts: config.loginLimits.maxPerAccountAndIp,
          audit,
          logger,
        }),
        secondFactors,
        sealer,
        loginChallenges,
        throttleIpv6Prefix: config.throttleIpv6Prefix,
        signupThrottle: limiter(config.signupLimits.windowSeconds, 'sign-up throttle'),
        signupLimits: config.signupLimits,
        throttledRefusals: throttle
          ? new RedisThrottledRefusals(throttle.connection, throttle.prefix, logger)
          : recordEveryRefusal,
        sessionTtlSeconds: config.sessionTtlSeconds,
        signupEnabled: config.signupEnabled,
        deviceGrants,
        deviceThrottle: limiter(config.deviceFlow.limits.windowSeconds, 'device flow throttle'),
        deviceFlow: config.deviceFlow,
      });
      rpc.add(AdminRpc, serving.guard(AdminRpc, handlers));
      return new AdminContext({
        lifecycle,
        config,
        logger,
        clock,
        database,
        passwords,
        bus,
        scheduler,
        throttleRedis,
        billing,
        metrics,
        rpc,
        serving,
        accounts,
        sessions,
        apiKeys,
        audit,
        checkpoints,
        loginThrottle,
        totpResealer,
        expirySweep,
        webhooks,
        webhookDeliveries,
      });
    });
  }

  /** Closes everything, the last built first. */
  close(): Promise<void> {
    return this.lifecycle.close();
  }
}

/** The bus revoked keys are announced on and the maintenance scheduler: on Redis when configured. */
function connectBus(
  config: AdminConfig,
  given: Bus | undefined,
  logger: Logger,
  lifecycle: Lifecycle,
): { bus: Bus; scheduler: Scheduler } {
  if (!config.redis) {
    const bus = given ?? lifecycle.use('bus', new MemoryBus(), (b) => b.close());
    return { bus, scheduler: new MemoryScheduler(logger) };
  }
  const coordination = connectCoordination(config.redis, logger, {
    name: SERVICES.admin,
    busPrefix: config.redis.prefix,
    queue: { name: QUEUE_NAME, prefix: bullPrefix(config.redis.prefix) },
    bus: given,
  });
  lifecycle.onClose('redis (bus, scheduler)', () => {
    for (const connection of coordination.connections) connection.disconnect();
  });
  if (!given) lifecycle.use('bus', coordination.bus, (b) => b.close());
  return { bus: coordination.bus, scheduler: coordination.scheduler ?? new MemoryScheduler(logger) };
}
