import { type PlanId, SERVICES } from '@relayplane/contract/contract';
import {
  ConfigError,
  EnvReader,
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
import { variablesOf } from '@relayplane/shared/settings-common';
import { DEFAULT_PLANS, type Plan, resolvePlans } from './domain/plans.ts';
import { BILLING, type BILLING_PROVIDERS } from './settings.ts';

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

export { BILLING_PROVIDERS } from './settings.ts';

function readProvider(r: EnvReader, plans: Record<PlanId, Plan>): ProviderConfig {
  const kind = r.read(BILLING.provider) as (typeof BILLING_PROVIDERS)[number];
  // Read (so a bad value stops the process) whatever the provider; Stripe takes payment and ignores it.
  const paidCheckout = r.read(BILLING.builtinPaidCheckout);
  if (kind === 'builtin') return { kind, paidCheckout };
  const secretKey = r.string(BILLING.stripeSecretKey.env);
  if (!/^(sk|rk)_(test|live)_[A-Za-z0-9]+$/.test(secretKey)) {
    throw new ConfigError(
      BILLING.stripeSecretKey.env,
      'must be a Stripe secret key (sk_test_…, sk_live_… or rk_…)',
    );
  }
  const webhookSecret = r.string(BILLING.stripeWebhookSecret.env);
  if (!/^whsec_[A-Za-z0-9+/=]+$/.test(webhookSecret)) {
    throw new ConfigError(BILLING.stripeWebhookSecret.env, 'must be a webhook signing secret (whsec_…)');
  }
  if (!Object.values(plans).some((p) => p.stripePriceId !== undefined)) {
    throw new ConfigError(
      'RELAYPLANE_PLANS_FILE',
      'sets no stripe_price_id for any plan, but BILLING_PROVIDER=stripe needs one per plan sold through checkout',
    );
  }
  let apiBase: { protocol: 'http' | 'https'; host: string; port: number } | undefined;
  if (r.has('STRIPE_API_BASE')) {
    const url = new URL(r.read(BILLING.stripeApiBase));
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
    webhookToleranceSeconds: r.read(BILLING.stripeWebhookTolerance),
    apiBase,
  };
}

export function readBillingConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<BillingConfig> = {},
): BillingConfig {
  const r = new EnvReader(env);
  const S = BILLING;
  const plans =
    overrides.plans ?? readYamlFile(r, S.plansFile.env, resolvePlans) ?? structuredClone(DEFAULT_PLANS);
  return {
    listen: overrides.listen ?? r.read(S.listen),
    maxConnectionAgeMs: overrides.maxConnectionAgeMs ?? readMaxConnectionAgeMs(r, S.maxConnectionAge.env),
    database:
      overrides.database ??
      readDatabase(r, { url: variablesOf(S.databaseUrl), poolMax: S.databasePoolMax.env }),
    plans,
    metricsAddress:
      'metricsAddress' in overrides ? overrides.metricsAddress : readMetricsAddress(r, S.metrics.env),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.billing),
    healthListen:
      'healthListen' in overrides ? overrides.healthListen : readHealthListen(r, S.healthListen.env),
    logLevel: overrides.logLevel ?? (r.read(S.logLevel) as LogLevel),
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(r, {
            url: variablesOf(S.redisUrl),
            clusterNodes: variablesOf(S.redisClusterNodes),
            prefix: variablesOf(S.redisPrefix),
          }),
    redisCommandTimeoutMs: overrides.redisCommandTimeoutMs ?? r.read(S.redisCommandTimeout),
    issuerAddress: overrides.issuerAddress ?? r.read(S.issuerAddress),
    adminAddress: overrides.adminAddress ?? r.read(S.adminAddress),
    usageIntervalMs: overrides.usageIntervalMs ?? r.read(S.usageInterval),
    checkout: overrides.checkout ?? {
      maxPerWindow: r.read(S.checkoutMaxPerWindow),
      windowSeconds: r.read(S.checkoutWindow),
      sessionTtlSeconds: r.read(S.checkoutSessionTtl),
    },
    provider: overrides.provider ?? readProvider(r, plans),
    throttleIpv6Prefix: overrides.throttleIpv6Prefix ?? r.read(S.throttleIpv6Prefix),
  };
}
