/**
 * Every environment variable billing reads, declared once (packages/shared/src/settings.ts):
 * config.ts reads them, `pnpm docs:config` documents them (docs/configuration.md).
 */
import { boolean, integer, other, type Setting, text } from '@relayplane/shared/settings';
import {
  databaseSettings,
  GRPC_TLS_SETTINGS,
  grpcServerSettings,
  LOG_LEVEL,
  metricsSetting,
  redisSettings,
  THROTTLE_IPV6_PREFIX,
} from '@relayplane/shared/settings-common';
import { DEFAULT_USAGE_INTERVAL_MS } from './jobs/usage-aggregation.ts';

export const BILLING_PROVIDERS = ['builtin', 'stripe'] as const;

const server = grpcServerSettings('BILLING', '127.0.0.1:50053');
const database = databaseSettings('BILLING');
const redis = redisSettings(
  'BILLING',
  'Plan-change announcements, the checkout throttle and the usage jobs; unset: in-process, for one replica only.',
);

export const BILLING = {
  listen: server.listen,
  maxConnectionAge: server.maxConnectionAge,
  databaseUrl: database.url,
  databasePoolMax: database.poolMax,
  plansFile: other('RELAYPLANE_PLANS_FILE', 'file', {
    description: 'Plan limits and prices, YAML or JSON (below); unset: the built-in plans.',
  }),
  redisUrl: redis.url,
  redisClusterNodes: redis.clusterNodes,
  redisPrefix: redis.prefix,
  redisCommandTimeout: integer('BILLING_REDIS_COMMAND_TIMEOUT_MS', {
    default: 250,
    min: 50,
    max: 10_000,
    description: 'A slow Redis: the checkout throttle falls back to its per-process limit after this.',
  }),
  issuerAddress: text('BILLING_ISSUER_ADDRESS', 'target', {
    default: '127.0.0.1:50051',
    description: 'gRPC target of the issuers (usage summaries).',
  }),
  adminAddress: text('BILLING_ADMIN_ADDRESS', 'target', {
    default: '127.0.0.1:50052',
    description: "gRPC target of admin: the audit outbox delivers billing's events there.",
  }),
  usageInterval: integer('BILLING_USAGE_INTERVAL_MS', {
    default: DEFAULT_USAGE_INTERVAL_MS,
    min: 1_000,
    max: 86_400_000,
    description: 'How often the usage of today and yesterday is re-aggregated.',
  }),
  checkoutMaxPerWindow: integer('BILLING_CHECKOUT_MAX_PER_WINDOW', {
    default: 5,
    min: 1,
    max: 10_000,
    description: 'Checkout sessions one tenant may create per window (429 over it).',
  }),
  checkoutWindow: integer('BILLING_CHECKOUT_WINDOW_SECONDS', {
    default: 60,
    min: 1,
    max: 86_400,
    description: 'The checkout throttle window.',
  }),
  checkoutSessionTtl: integer('BILLING_CHECKOUT_SESSION_TTL_SECONDS', {
    default: 86_400,
    min: 1_800,
    max: 86_400,
    description: 'How long a checkout session stays open.',
  }),
  provider: text('BILLING_PROVIDER', 'enum', {
    values: BILLING_PROVIDERS,
    default: 'builtin',
    description: "`builtin`: the gateway's confirmation page; `stripe`: Stripe Checkout and webhooks.",
  }),
  builtinPaidCheckout: boolean('BILLING_BUILTIN_PAID_CHECKOUT', {
    default: false,
    description:
      '`true`: the built-in provider checks out paid plans without payment (demos, trusted users); `false`: 422 for them. Ignored with `stripe` (docs/billing.md).',
  }),
  stripeSecretKey: other('STRIPE_SECRET_KEY', 'secret', {
    description:
      'With `stripe`, required: `sk_test_…`, `sk_live_…` or `rk_…`. Plans name their `stripe_price_id` in the plans file.',
  }),
  stripeWebhookSecret: other('STRIPE_WEBHOOK_SECRET', 'secret', {
    description: 'With `stripe`, required: the webhook signing secret (`whsec_…`).',
  }),
  stripeWebhookTolerance: integer('STRIPE_WEBHOOK_TOLERANCE_SECONDS', {
    default: 300,
    min: 1,
    max: 3_600,
    description: "How far a webhook's signed timestamp may be off.",
  }),
  stripeApiBase: text('STRIPE_API_BASE', 'url', {
    protocols: ['http:', 'https:'],
    description:
      'Another Stripe API endpoint, scheme + host + port only (tests point it at a local fake); unset: api.stripe.com.',
  }),
  throttleIpv6Prefix: THROTTLE_IPV6_PREFIX,
  metrics: metricsSetting('BILLING'),
  healthListen: server.healthListen,
  logLevel: LOG_LEVEL,
} as const;

/** Every variable billing reads, in the order documented. */
export const BILLING_SETTINGS: readonly Setting[] = [...Object.values(BILLING), ...GRPC_TLS_SETTINGS];
