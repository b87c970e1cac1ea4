import { type PlanId, SERVICES } from '@relayplane/contract/contract';
import { DEFAULT_THROTTLE_IPV6_PREFIX } from '@relayplane/shared/client-address';
import {
  ConfigError,
  EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readDatabase,
  readMaxConnectionAgeMs,
  readMetricsAddress,
  readRedis,
  readYamlFile,
} from '@relayplane/shared/config';
import type { DatabaseConfig } from '@relayplane/shared/db';
import { type GrpcTlsConfig, readGrpcTls, readHealthListen } from '@relayplane/shared/grpc-tls';
import type { RedisConfig } from '@relayplane/shared/redis';
import { DEFAULT_PLANS, type Plan, resolvePlans } from './domain/plans.ts';
import { DEFAULT_USAGE_INTERVAL_MS } from './jobs/usage-aggregation.ts';

export interface BillingConfig {
  /** host:port the gRPC server binds (port 0: any free port). */
  listen: string;
  /** gRPC server max connection age (ms); 0: never. */
  maxConnectionAgeMs: number;
  database: DatabaseConfig;
  plans: Record<PlanId, Plan>;
  /** host:port of the Prometheus metrics listener (`BILLING_METRICS_ADDRESS`); undefined: none. */
  metricsAddress: string | undefined;
  /** Mutual TLS on this service's gRPC links (`RELAYPLANE_GRPC_TLS_*`); undefined: plaintext. */
  grpcTls: GrpcTlsConfig | undefined;
  /** host:port of the plaintext, health-only gRPC listener (`BILLING_HEALTH_LISTEN_ADDRESS`); undefined: none. */
  healthListen: string | undefined;
  logLevel: LogLevel;
  /**
   * Redis for the bus (plan changes), the usage job scheduler and the checkout throttle
   * (`BILLING_REDIS_URL`, else `REDIS_URL`). Undefined: in-process twins (embedded mode, or
   * one replica); a plan change then reaches only this process's subscribers.
   */
  redis: RedisConfig | undefined;
  /** Bound on one checkout-throttle Redis command; past it the per-process limit answers. */
  redisCommandTimeoutMs: number;
  /** gRPC target of the issuer (usage aggregation reads credential counts from it). */
  issuerAddress: string;
  /** gRPC target of admin (`BILLING_ADMIN_ADDRESS`): the audit outbox delivers events there. */
  adminAddress: string;
  /** How often the usage job aggregates yesterday and today (`BILLING_USAGE_INTERVAL_MS`). */
  usageIntervalMs: number;
  checkout: CheckoutConfig;
  provider: ProviderConfig;
  /** `RELAYPLANE_THROTTLE_IPV6_PREFIX`: a per-client key counts an IPv6 address by this network. */
  throttleIpv6Prefix: number;
}

export interface CheckoutConfig {
  /** Checkout sessions one tenant may create per window (`BILLING_CHECKOUT_MAX_PER_WINDOW`). */
  maxPerWindow: number;
  /** `BILLING_CHECKOUT_WINDOW_SECONDS`. */
  windowSeconds: number;
  /** How long a checkout session stays open (`BILLING_CHECKOUT_SESSION_TTL_SECONDS`). */
  sessionTtlSeconds: number;
}

export type ProviderConfig =
  | {
      kind: 'builtin';
      /**
       * Whether checkout of a paid plan (`isPaidPlan`) is allowed (`BILLING_BUILTIN_PAID_CHECKOUT`,
       * default false): the built-in provider takes no payment, so with it on anyone who can sign
       * up can confirm any plan. For demos and deployments whose users are all trusted.
       */
      paidCheckout: boolean;
    }
  | {
      kind: 'stripe';
      secretKey: string;
      webhookSecret: string;
      /** Seconds a webhook's signed timestamp may be off (`STRIPE_WEBHOOK_TOLERANCE_SECONDS`). */
      webhookToleranceSeconds: number;
      /** The API endpoint the SDK talks to (`STRIPE_API_BASE`); undefined: api.stripe.com. */
      apiBase: { protocol: 'http' | 'https'; host: string; port: number } | undefined;
    };

export const BILLING_PROVIDERS = ['builtin', 'stripe'] as const;

function readProvider(r: EnvReader, plans: Record<PlanId, Plan>): ProviderConfig {
  const kind = r.oneOf('BILLING_PROVIDER', BILLING_PROVIDERS, 'builtin');
  // Read (so a bad value stops the process) whatever the provider; Stripe takes payment and ignores it.
  const paidCheckout = r.bool('BILLING_BUILTIN_PAID_CHECKOUT', false);
  if (kind === 'builtin') return { kind, paidCheckout };
  const secretKey = r.string('STRIPE_SECRET_KEY');
  if (!/^(sk|rk)_(test|live)_[A-Za-z0-9]+$/.test(secretKey)) {
    throw new ConfigError('STRIPE_SECRET_KEY', 'must be a Stripe secret key (sk_test_…, sk_live_… or rk_…)');
  }
  const webhookSecret = r.string('STRIPE_WEBHOOK_SECRET');
  if (!/^whsec_[A-Za-z0-9+/=]+$/.test(webhookSecret)) {
    throw new ConfigError('STRIPE_WEBHOOK_SECRET', 'must be a webhook signing secret (whsec_…)');
  }
  if (!Object.values(plans).some((p) => p.stripePriceId !== undefined)) {
    throw new ConfigError(
      'RELAYPLANE_PLANS_FILE',
      'sets no stripe_price_id for any plan, but BILLING_PROVIDER=stripe needs one per plan sold through checkout',
    );
  }
  let apiBase: { protocol: 'http' | 'https'; host: string; port: number } | undefined;
  if (r.has('STRIPE_API_BASE')) {
    const url = new URL(r.url('STRIPE_API_BASE', ['http:', 'https:']));
    if (url.pathname !== '/' || url.search) {
      throw new ConfigError(
        'STRIPE_API_BASE',
        'must be a scheme, host and port only (e.g. http://127.0.0.1:12111)',
      );
    }
    const protocol = url.protocol === 'http:' ? 'http' : 'https';
    apiBase = {
      protocol,
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port ? Number(url.port) : protocol === 'http' ? 80 : 443,
    };
  }
  return {
    kind,
    secretKey,
    webhookSecret,
    webhookToleranceSeconds: r.int('STRIPE_WEBHOOK_TOLERANCE_SECONDS', 300, { min: 1, max: 3_600 }),
    apiBase,
  };
}

export function readBillingConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<BillingConfig> = {},
): BillingConfig {
  const r = new EnvReader(env);
  const plans =
    overrides.plans ??
    readYamlFile(r, 'RELAYPLANE_PLANS_FILE', resolvePlans) ??
    structuredClone(DEFAULT_PLANS);
  return {
    listen: overrides.listen ?? r.address('BILLING_LISTEN_ADDRESS', '127.0.0.1:50053'),
    maxConnectionAgeMs:
      overrides.maxConnectionAgeMs ?? readMaxConnectionAgeMs(r, 'BILLING_GRPC_MAX_CONNECTION_AGE_MS'),
    database:
      overrides.database ??
      readDatabase(r, {
        url: ['BILLING_DATABASE_URL', 'DATABASE_URL'],
        poolMax: 'BILLING_DATABASE_POOL_MAX',
      }),
    plans,
    metricsAddress:
      'metricsAddress' in overrides
        ? overrides.metricsAddress
        : readMetricsAddress(r, 'BILLING_METRICS_ADDRESS'),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.billing),
    healthListen:
      'healthListen' in overrides
        ? overrides.healthListen
        : readHealthListen(r, 'BILLING_HEALTH_LISTEN_ADDRESS'),
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(r, {
            url: ['BILLING_REDIS_URL', 'REDIS_URL'],
            clusterNodes: ['BILLING_REDIS_CLUSTER_NODES', 'RELAYPLANE_REDIS_CLUSTER_NODES'],
            prefix: ['BILLING_REDIS_PREFIX', 'RELAYPLANE_REDIS_PREFIX'],
          }),
    redisCommandTimeoutMs:
      overrides.redisCommandTimeoutMs ??
      r.int('BILLING_REDIS_COMMAND_TIMEOUT_MS', 250, { min: 50, max: 10_000 }),
    issuerAddress: overrides.issuerAddress ?? r.target('BILLING_ISSUER_ADDRESS', '127.0.0.1:50051'),
    adminAddress: overrides.adminAddress ?? r.target('BILLING_ADMIN_ADDRESS', '127.0.0.1:50052'),
    usageIntervalMs:
      overrides.usageIntervalMs ??
      r.int('BILLING_USAGE_INTERVAL_MS', DEFAULT_USAGE_INTERVAL_MS, { min: 1_000, max: 86_400_000 }),
    checkout: overrides.checkout ?? {
      maxPerWindow: r.int('BILLING_CHECKOUT_MAX_PER_WINDOW', 5, { min: 1, max: 10_000 }),
      windowSeconds: r.int('BILLING_CHECKOUT_WINDOW_SECONDS', 60, { min: 1, max: 86_400 }),
      sessionTtlSeconds: r.int('BILLING_CHECKOUT_SESSION_TTL_SECONDS', 86_400, { min: 1_800, max: 86_400 }),
    },
    provider: overrides.provider ?? readProvider(r, plans),
    throttleIpv6Prefix:
      overrides.throttleIpv6Prefix ??
      r.int('RELAYPLANE_THROTTLE_IPV6_PREFIX', DEFAULT_THROTTLE_IPV6_PREFIX, { min: 16, max: 128 }),
  };
}
