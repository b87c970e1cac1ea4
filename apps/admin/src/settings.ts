/**
 * Every environment variable admin reads, declared once (packages/shared/src/settings.ts):
 * config.ts reads them, `pnpm docs:config` documents them (docs/configuration.md).
 */
import { DEFAULT_AUDIT_RETENTION_DAYS, PLAN_IDS, PLANS } from '@relayplane/contract/contract';
import { boolean, integer, other, type Setting, text } from '@relayplane/shared/settings';
import {
  databaseSettings,
  GRPC_TLS_SETTINGS,
  grpcServerSettings,
  KEK,
  KEK_PREVIOUS,
  LOG_LEVEL,
  metricsSetting,
  redisSettings,
  THROTTLE_IPV6_PREFIX,
} from '@relayplane/shared/settings-common';
import { DEFAULT_MAX_ACTIVE_KEYS_PER_BOT } from './stores/bots.ts';
import { DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT } from './stores/identity-tokens.ts';

const server = grpcServerSettings('ADMIN', '127.0.0.1:50052');
const database = databaseSettings('ADMIN');
const redis = redisSettings(
  'ADMIN',
  "API-key revocation announcements, login throttling, the maintenance jobs' queue; unset: the gateways' 1 s cache bounds revocations, throttling per process.",
);
const count = (env: string, d: number, max: number, description: string) =>
  integer(env, { default: d, min: 1, max, description });

export const ADMIN = {
  listen: server.listen,
  maxConnectionAge: server.maxConnectionAge,
  databaseUrl: database.url,
  databasePoolMax: database.poolMax,
  redisUrl: redis.url,
  redisClusterNodes: redis.clusterNodes,
  redisPrefix: redis.prefix,
  billingAddress: text('ADMIN_BILLING_ADDRESS', 'target', {
    default: '127.0.0.1:50053',
    description: "gRPC target of billing (the gateway's forms).",
  }),
  sessionTtl: integer('ADMIN_SESSION_TTL_SECONDS', {
    default: 43_200,
    min: 300,
    max: 2_592_000,
    description: 'Lifetime of a login session (12 h by default).',
  }),
  signupEnabled: boolean('RELAYPLANE_SIGNUP_ENABLED', {
    default: true,
    description: 'Allow `POST /admin/v1/auth/signup`.',
  }),
  bootstrapEmail: other('RELAYPLANE_BOOTSTRAP_EMAIL', 'string', {
    description:
      'The first owner (a platform admin), created when no user exists, with the password below; both or neither.',
  }),
  bootstrapPassword: other('RELAYPLANE_BOOTSTRAP_PASSWORD', 'secret', {
    description: "The first owner's password (the password rules apply).",
  }),
  bootstrapTenant: text('RELAYPLANE_BOOTSTRAP_TENANT', 'string', {
    default: 'default',
    description: 'Name of the first tenant.',
  }),
  bootstrapPlan: text('RELAYPLANE_BOOTSTRAP_PLAN', 'enum', {
    values: PLAN_IDS,
    default: PLANS.enterprise,
    description: "The first tenant's plan.",
  }),
  loginMaxPerAccountAndIp: count(
    'ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP',
    10,
    100_000,
    'Login attempts on one account from one client per window (docs/iam.md, throttling).',
  ),
  loginMaxPerAccount: count(
    'ADMIN_LOGIN_MAX_PER_ACCOUNT',
    100,
    1_000_000,
    'Failed logins on one account from every unknown client per window; past it they are slowed, never locked out.',
  ),
  loginMaxPerIp: count(
    'ADMIN_LOGIN_MAX_PER_IP',
    50,
    1_000_000,
    'Login attempts of one client across accounts per window.',
  ),
  loginMaxPerDevice: count(
    'ADMIN_LOGIN_MAX_PER_DEVICE',
    10,
    100_000,
    'Login attempts of one known device on its account per window, instead of the per-account-and-client limit.',
  ),
  loginSlow: integer('ADMIN_LOGIN_SLOW_SECONDS', {
    default: 10,
    min: 1,
    max: 300,
    description: 'Past the failure limit, unknown clients share one attempt per this many seconds.',
  }),
  loginWindow: count('ADMIN_LOGIN_WINDOW_SECONDS', 900, 86_400, "The login throttles' window."),
  signupMaxPerIp: count(
    'ADMIN_SIGNUP_MAX_PER_IP',
    10,
    1_000_000,
    'Sign-ups per client per window (429 over it).',
  ),
  signupWindow: count('ADMIN_SIGNUP_WINDOW_SECONDS', 3_600, 86_400, "The sign-up throttle's window."),
  deviceClientIds: other('ADMIN_DEVICE_CLIENT_IDS', 'list', {
    default: 'relayplane-cli',
    description: 'OAuth public clients allowed the device flow, comma-separated printable ids.',
  }),
  deviceCodeTtl: integer('ADMIN_DEVICE_CODE_TTL_SECONDS', {
    default: 600,
    min: 60,
    max: 1_800,
    description: 'Lifetime of a device code and its user code.',
  }),
  devicePollInterval: integer('ADMIN_DEVICE_POLL_INTERVAL_SECONDS', {
    default: 5,
    min: 1,
    max: 60,
    description: 'The polling interval a device grant starts with.',
  }),
  cliTokenTtl: integer('ADMIN_CLI_TOKEN_TTL_SECONDS', {
    default: 2_592_000,
    min: 300,
    max: 31_536_000,
    description: 'Lifetime of a CLI token from the device flow (30 days by default).',
  }),
  deviceMaxCodesPerIp: count(
    'ADMIN_DEVICE_MAX_CODES_PER_IP',
    30,
    1_000_000,
    'Device codes issued to one client per window.',
  ),
  deviceMaxEntriesPerUser: count(
    'ADMIN_DEVICE_MAX_ENTRIES_PER_USER',
    20,
    100_000,
    'User codes one user may enter per window.',
  ),
  deviceMaxEntriesPerIp: count(
    'ADMIN_DEVICE_MAX_ENTRIES_PER_IP',
    60,
    1_000_000,
    'User codes one client may enter per window.',
  ),
  deviceWindow: count('ADMIN_DEVICE_WINDOW_SECONDS', 900, 86_400, "The device flow throttles' window."),
  auditRetention: integer('RELAYPLANE_AUDIT_RETENTION_DAYS', {
    default: DEFAULT_AUDIT_RETENTION_DAYS,
    min: 1,
    max: 36_500,
    description:
      'Audit events older than this are pruned hourly; verification survives pruning (docs/audit.md).',
  }),
  throttleIpv6Prefix: THROTTLE_IPV6_PREFIX,
  kek: KEK,
  kekPrevious: KEK_PREVIOUS,
  auditSigningKeyFile: other('RELAYPLANE_AUDIT_SIGNING_KEY_FILE', 'file', {
    description:
      'Ed25519 private key (PEM PKCS#8) that signs audit checkpoints, kept out of the database; unset: derived from the KEK (embedded: `audit-signing-key.pem` in the data directory).',
  }),
  auditCheckpoint: integer('RELAYPLANE_AUDIT_CHECKPOINT_SECONDS', {
    default: 300,
    min: 1,
    max: 86_400,
    description: 'How often each moved audit chain head is signed (docs/audit.md, signed checkpoints).',
  }),
  webhooksAllowHttpLoopback: boolean('RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK', {
    default: false,
    description:
      'Webhook endpoints may be http:// and resolve to loopback addresses (local receivers, tests); off: https and public addresses only (docs/webhooks.md).',
  }),
  webhooksRetrySchedule: other('RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE', 'list', {
    description:
      'Seconds before each webhook retry, comma-separated (default 5,300,1800,7200,18000,36000,36000: about 27.6 h; ±20 % jitter). After the last retry fails the delivery has failed.',
  }),
  webhooksDisableAfter: integer('RELAYPLANE_WEBHOOKS_DISABLE_AFTER_SECONDS', {
    default: 259_200,
    min: 1,
    max: 30 * 86_400,
    description:
      'A webhook endpoint whose every attempt has failed for this long is disabled (default 3 days).',
  }),
  webhooksConcurrency: integer('RELAYPLANE_WEBHOOKS_CONCURRENCY', {
    default: 16,
    min: 1,
    max: 1_000,
    description:
      'Webhook delivery attempts at once per admin replica (at most 4 per endpoint, 1 while it fails).',
  }),
  webhooksRetention: integer('RELAYPLANE_WEBHOOKS_RETENTION_DAYS', {
    default: 30,
    min: 1,
    max: 3_650,
    description:
      'Finished webhook deliveries (and their messages) are kept this many days in the delivery log.',
  }),
  maxActiveKeysPerBot: count(
    'ADMIN_MAX_ACTIVE_KEYS_PER_BOT',
    DEFAULT_MAX_ACTIVE_KEYS_PER_BOT,
    100_000,
    'Unrevoked keys one bot may have (one more: 422).',
  ),
  maxActiveIdentityTokensPerBot: count(
    'ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT',
    DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT,
    1_000_000,
    'Unrevoked, unexpired identity tokens of one bot (one more: 422).',
  ),
  metrics: metricsSetting('ADMIN'),
  healthListen: server.healthListen,
  logLevel: LOG_LEVEL,
} as const;

/** Every variable admin reads, in the order documented. */
export const ADMIN_SETTINGS: readonly Setting[] = [...Object.values(ADMIN), ...GRPC_TLS_SETTINGS];
