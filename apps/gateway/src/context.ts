/**
 * The gateway's composition root: the one place its dependencies are built (clients to the
 * services, the bus, the caches, the issuance streams, the per-key rate limiter) and their
 * closers registered, in build order, on one Lifecycle. `buildApp(ctx)` only registers plugins
 * and routes on what is here; `GatewayService` only starts and stops.
 */

import { BUS_CHANNELS, SERVICES } from '@relayplane/contract/contract';
import type { Relay } from '@relayplane/proto/issuer';
import type { Bus } from '@relayplane/shared/bus';
import { ConfigError } from '@relayplane/shared/config-error';
import { connectCoordination } from '@relayplane/shared/coordination';
import { countRefusedReloads, type GrpcTls, grpcTls } from '@relayplane/shared/grpc-tls';
import { Lifecycle } from '@relayplane/shared/lifecycle';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type MetricsServer, type Registry, serveMetrics } from '@relayplane/shared/metrics';
import { createLeasedRateLimiter, type LeasedRateLimiter } from '@relayplane/shared/rate-limit';
import { createRequestPathRedis, deferringSubscriptions } from '@relayplane/shared/redis';
import { closeClients, connectClients, type GatewayClients } from './clients.ts';
import type { GatewayConfig } from './config.ts';
import { EntitlementCache } from './entitlements.ts';
import { IssuanceClient } from './issuance-client.ts';
import { JwksCache } from './jwks-cache.ts';
import type { ApiKeyAuth } from './plugins/auth.ts';
import { redisKeys } from './redis/keys.ts';
import { TtlCache } from './ttl-cache.ts';

/** Bound on one issuance-rate lease command before the per-process count answers instead. */
const ISSUANCE_RATE_REDIS_TIMEOUT_MS = 250;

/** What the context reads of the configuration: all of it in a service; tests pass what they need. */
export type ContextConfig = Pick<GatewayConfig, 'bodyLimitBytes' | 'jwksCacheMs'> & Partial<GatewayConfig>;

export interface GatewayOverrides {
  logger?: Logger;
  /** Clients instead of connecting to `config.services` (closed with the context all the same). */
  clients?: GatewayClients;
  /** Embedded mode passes the in-process bus it shares with the issuer (not closed here). */
  bus?: Bus;
  /** Where the HTTP request metrics go; default: a registry of its own. */
  metrics?: Registry;
}

type Fields = Omit<GatewayContext, 'serveMetrics' | 'metricsPort' | 'close'>;

export class GatewayContext {
  readonly lifecycle: Lifecycle;
  readonly config: ContextConfig;
  readonly logger: Logger;
  /** This gateway's Prometheus metrics (served on `config.metricsAddress` by serveMetrics()). */
  readonly metrics: Registry;
  readonly clients: GatewayClients;
  /** Invalidations from the other replicas and services; undefined without Redis or a given bus. */
  readonly bus: Bus | undefined;
  readonly jwks: JwksCache;
  /** API-key verifications, by the key's SHA-256, for `authCacheMs` (1 s) or until revoked. */
  readonly apiKeys: TtlCache<string, ApiKeyAuth>;
  /** Relay-token verifications, for `authCacheMs`. */
  readonly relays: TtlCache<string, Relay>;
  readonly entitlements: EntitlementCache;
  readonly issuance: IssuanceClient;
  /** `max_issuance_per_second_per_key`, per API key id, counted across gateways (Redis leases). */
  readonly issuanceRate: LeasedRateLimiter;
  #metricsServer: MetricsServer | undefined;

  private constructor(fields: Fields) {
    this.lifecycle = fields.lifecycle;
    this.config = fields.config;
    this.logger = fields.logger;
    this.metrics = fields.metrics;
    this.clients = fields.clients;
    this.bus = fields.bus;
    this.jwks = fields.jwks;
    this.apiKeys = fields.apiKeys;
    this.relays = fields.relays;
    this.entitlements = fields.entitlements;
    this.issuance = fields.issuance;
    this.issuanceRate = fields.issuanceRate;
    // Registered first, so closed last: metrics stay scrapable while the gateway drains.
    this.lifecycle.onClose('metrics server', () => this.#metricsServer?.close());
  }

  static async fromConfig(config: ContextConfig, overrides: GatewayOverrides = {}): Promise<GatewayContext> {
    const logger =
      overrides.logger ?? createLogger({ level: config.logLevel ?? 'info', service: SERVICES.gateway });
    const metrics =
      overrides.metrics ?? createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
    const lifecycle = new Lifecycle(logger);
    const fields = await lifecycle.build(async () => {
      const tls = overrides.clients ? undefined : grpcTls(config.grpcTls, logger);
      countRefusedReloads(metrics, tls);
      const clients = overrides.clients ?? connectServices(config, tls);
      lifecycle.use('service clients', clients, closeClients);
      const bus = overrides.bus ?? connectBus(config, logger, lifecycle);
      const jwks = lifecycle.use(
        'jwks cache',
        new JwksCache(clients.issuer, config.jwksCacheMs, logger),
        (j) => j.close(),
      );
      if (bus) await jwks.listen(bus);
      // Verification results live at most `authCacheMs` (1 s): a revoked key stops working on every
      // replica within that bound even if the invalidation message is lost; the bus makes it immediate.
      const authCacheMs = config.authCacheMs ?? 1_000;
      const apiKeys = new TtlCache<string, ApiKeyAuth>(authCacheMs);
      const relays = new TtlCache<string, Relay>(authCacheMs);
      const entitlements = new EntitlementCache(clients.billing, authCacheMs);
      const issuance = lifecycle.use(
        'issuance streams',
        new IssuanceClient(
          clients.issuer,
          {
            timeoutMs: config.rpcTimeoutMs ?? 5_000,
            streams: config.issuanceStreams,
            maxAgeMs: config.issuanceStreamMaxAgeMs,
          },
          logger,
        ),
        (i) => i.close(),
      );
      const issuanceRate = issuanceRateLimiter(config, logger, lifecycle);
      if (bus) {
        // Payloads: the revoked key's SHA-256; the tenant whose plan changed.
        const revoked = await bus.subscribe(BUS_CHANNELS.apiKeysRevoked, (hash) => apiKeys.delete(hash));
        lifecycle.onClose('api key invalidations', revoked);
        const plans = await bus.subscribe(BUS_CHANNELS.plansChanged, (tenantId) =>
          entitlements.invalidate(tenantId),
        );
        lifecycle.onClose('plan invalidations', plans);
      }
      return { clients, bus, jwks, apiKeys, relays, entitlements, issuance, issuanceRate };
    });
    return new GatewayContext({ lifecycle, config, logger, metrics, ...fields });
  }

  /** Serves the metrics on `config.metricsAddress` (if set) until the context closes. */
  async serveMetrics(): Promise<void> {
    if (this.config.metricsAddress === undefined || this.#metricsServer) return;
    this.#metricsServer = await serveMetrics(this.config.metricsAddress, this.metrics, this.logger);
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.#metricsServer?.port;
  }

  /** Closes everything, the last built first. */
  close(): Promise<void> {
    return this.lifecycle.close();
  }
}

function connectServices(config: ContextConfig, tls: GrpcTls | undefined): GatewayClients {
  if (!config.services)
    throw new ConfigError('GATEWAY_ADMIN_ADDRESS', 'and the other service addresses are required');
  return connectClients(config.services, config.rpcTimeoutMs ?? 5_000, config.grpcDnsMinIntervalMs, tls);
}

/** The bus of its own (Redis) when configured; its subscriptions never wait for Redis. */
function connectBus(config: ContextConfig, logger: Logger, lifecycle: Lifecycle): Bus | undefined {
  if (!config.redis) return undefined;
  const coordination = connectCoordination(config.redis, logger, {
    name: SERVICES.gateway,
    busPrefix: redisKeys(config.redis.prefix).bus,
  });
  lifecycle.onClose('redis (bus)', () => {
    for (const connection of coordination.connections) connection.disconnect();
  });
  const bus = deferringSubscriptions(coordination.bus, coordination.connections, logger);
  lifecycle.use('bus', bus, (b) => b.close());
  return bus;
}

/**
 * max_issuance_per_second_per_key: one count per API key and second in Redis, shared by every
 * gateway, spent through leases (no round trip per request); per process while Redis fails,
 * and without Redis (embedded mode). See docs/billing.md.
 */
function issuanceRateLimiter(config: ContextConfig, logger: Logger, lifecycle: Lifecycle): LeasedRateLimiter {
  const redis =
    config.redis &&
    lifecycle.use(
      'redis (issuance rate)',
      createRequestPathRedis(config.redis, logger, {
        name: 'gateway-issuance-rate',
        commandTimeoutMs: ISSUANCE_RATE_REDIS_TIMEOUT_MS,
      }),
      (r) => r.disconnect(),
    );
  return lifecycle.use(
    'issuance rate limiter',
    createLeasedRateLimiter(
      redis && config.redis
        ? { connection: redis, prefix: redisKeys(config.redis.prefix).issuanceRate }
        : undefined,
      { windowMs: 1_000 },
      logger,
      'issuance rate limit',
    ),
    (l) => l.close(),
  );
}
