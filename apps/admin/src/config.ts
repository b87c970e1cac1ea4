import {
  DEFAULT_AUDIT_RETENTION_DAYS,
  PLAN_IDS,
  PLANS,
  type PlanId,
  SERVICES,
} from '@relayplane/contract/contract';
import { DEFAULT_THROTTLE_IPV6_PREFIX } from '@relayplane/shared/client-address';
import {
  ConfigError,
  EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readDatabase,
  readKek,
  readMaxConnectionAgeMs,
  readMetricsAddress,
  readPreviousKeks,
  readRedis,
} from '@relayplane/shared/config';
import type { DatabaseConfig } from '@relayplane/shared/db';
import { type GrpcTlsConfig, readGrpcTls, readHealthListen } from '@relayplane/shared/grpc-tls';
import type { RedisConfig } from '@relayplane/shared/redis';
import { checkEmail, checkPassword, checkTenantName } from './domain/validation.ts';
import { DEFAULT_MAX_ACTIVE_KEYS_PER_BOT } from './stores/bots.ts';
import { DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT } from './stores/identity-tokens.ts';

/** The first tenant and its owner, created at start when no user exists. */
export interface BootstrapConfig {
  email: string;
  password: string;
  tenantName: string;
  /** Any plan id of the contract (billing owns the catalogue); default enterprise. */
  plan: PlanId;
}

export interface AdminConfig {
  /** host:port the gRPC server binds (port 0: any free port). */
  listen: string;
  /** gRPC server max connection age (ms); 0: never. */
  maxConnectionAgeMs: number;
  database: DatabaseConfig;
  /**
   * Redis for the bus that announces revoked API keys to the gateways. Undefined: an
   * in-process bus (embedded mode passes its shared bus instead).
   */
  redis: RedisConfig | undefined;
  /** host:port of the billing gRPC service. */
  billingAddress: string;
  sessionTtlSeconds: number;
  signupEnabled: boolean;
  /** Undefined: no bootstrap owner is configured. */
  bootstrap: BootstrapConfig | undefined;
  /** Login attempt limits (per account and client IP, per account, per client IP; fixed window). */
  loginLimits: LoginLimits;
  /** Sign-up limits (per client IP, fixed window). */
  signupLimits: SignupLimits;
  /** OAuth device authorization grant (RFC 8628) for the CLI. */
  deviceFlow: DeviceFlowConfig;
  /** host:port of the Prometheus metrics listener (`ADMIN_METRICS_ADDRESS`); undefined: none. */
  metricsAddress: string | undefined;
  /** Mutual TLS on this service's gRPC links (`RELAYPLANE_GRPC_TLS_*`); undefined: plaintext. */
  grpcTls: GrpcTlsConfig | undefined;
  /** host:port of the plaintext, health-only gRPC listener (`ADMIN_HEALTH_LISTEN_ADDRESS`); undefined: none. */
  healthListen: string | undefined;
  logLevel: LogLevel;
  /** Audit events older than this are pruned (`RELAYPLANE_AUDIT_RETENTION_DAYS`, docs/audit.md). */
  auditRetentionDays: number;
  /**
   * The IPv6 prefix length every per-client-IP throttle key groups by
   * (`RELAYPLANE_THROTTLE_IPV6_PREFIX`, default 64): one /64 is one client.
   */
  throttleIpv6Prefix: number;
  /**
   * The key-encryption key (`RELAYPLANE_KEK`, the issuer's): admin derives its own keys from it
   * with HKDF, one label per use (the device-token MAC key; second-factor secrets are sealed under
   * another). Required.
   */
  kek: Buffer;
  /** Earlier KEKs (`RELAYPLANE_KEK_PREVIOUS`): what they sealed still opens. */
  kekPrevious: Buffer[];
  /**
   * The audit key's file (`RELAYPLANE_AUDIT_SIGNING_KEY_FILE`, PEM PKCS#8 Ed25519); undefined:
   * derived from the KEK. Either way, never in the database.
   */
  auditSigningKeyFile: string | undefined;
  /** How often each moved chain head is signed (`RELAYPLANE_AUDIT_CHECKPOINT_SECONDS`). */
  auditCheckpointSeconds: number;
  /** Per-bot limits (docs/iam.md, "Limits"): one more answers 422. */
  perBotLimits: { maxActiveKeys: number; maxActiveIdentityTokens: number };
}

/**
 * Login attempts allowed per window (docs/iam.md, "Login and sign-up throttling"); one more
 * answers `rate_limited` with the time left in the window. Password changes count against the
 * two account limits too.
 */
export interface LoginLimits {
  /** Tight: one account from one client IP (`ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP`). */
  maxPerAccountAndIp: number;
  /** Loose: one account from all client IPs together (`ADMIN_LOGIN_MAX_PER_ACCOUNT`). */
  maxPerAccount: number;
  /** One client IP across all accounts (`ADMIN_LOGIN_MAX_PER_IP`). */
  maxPerIp: number;
  /**
   * One known device (a valid device token) on its account (`ADMIN_LOGIN_MAX_PER_DEVICE`): it
   * replaces the account-and-IP limit and the account-wide one for that client.
   */
  maxPerDevice: number;
  /**
   * Past the account-wide limit, unknown clients of the account share one attempt per this many
   * seconds (`ADMIN_LOGIN_SLOW_SECONDS`): a 429 whose `Retry-After` is at most this, never the window.
   */
  slowSeconds: number;
  windowSeconds: number;
}

/** Sign-ups allowed per client IP and window; one more answers `rate_limited`. */
export interface SignupLimits {
  maxPerIp: number;
  windowSeconds: number;
}

const SESSION_TTL_RANGE = { min: 300, max: 2_592_000 } as const;

export interface DeviceFlowConfig {
  /** Public OAuth clients allowed to start the flow (`ADMIN_DEVICE_CLIENT_IDS`, comma-separated). */
  clientIds: string[];
  /** Lifetime of a device code / user code pair (RFC 8628 `expires_in`). */
  codeTtlSeconds: number;
  /** Polling interval a new grant starts with (RFC 8628 `interval`). */
  intervalSeconds: number;
  /** Lifetime of the CLI token (`rpc_`) an approved grant answers. */
  tokenTtlSeconds: number;
  /** Fixed-window limits: codes issued per client IP; user codes entered per user and per client IP. */
  limits: {
    maxCodesPerIp: number;
    maxEntriesPerUser: number;
    maxEntriesPerIp: number;
    windowSeconds: number;
  };
}

const CLIENT_ID = /^[\x21-\x7e]{1,128}$/;

function readDeviceFlow(r: EnvReader): DeviceFlowConfig {
  const clientIds = (r.optional('ADMIN_DEVICE_CLIENT_IDS') ?? 'relayplane-cli')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  const bad = clientIds.find((id) => !CLIENT_ID.test(id));
  if (bad !== undefined || clientIds.length === 0) {
    throw new ConfigError(
      'ADMIN_DEVICE_CLIENT_IDS',
      'must be a comma-separated list of printable client ids',
    );
  }
  return {
    clientIds,
    codeTtlSeconds: r.int('ADMIN_DEVICE_CODE_TTL_SECONDS', 600, { min: 60, max: 1_800 }),
    intervalSeconds: r.int('ADMIN_DEVICE_POLL_INTERVAL_SECONDS', 5, { min: 1, max: 60 }),
    tokenTtlSeconds: r.int('ADMIN_CLI_TOKEN_TTL_SECONDS', 2_592_000, { min: 300, max: 31_536_000 }),
    limits: {
      maxCodesPerIp: r.int('ADMIN_DEVICE_MAX_CODES_PER_IP', 30, { min: 1, max: 1_000_000 }),
      maxEntriesPerUser: r.int('ADMIN_DEVICE_MAX_ENTRIES_PER_USER', 20, { min: 1, max: 100_000 }),
      maxEntriesPerIp: r.int('ADMIN_DEVICE_MAX_ENTRIES_PER_IP', 60, { min: 1, max: 1_000_000 }),
      windowSeconds: r.int('ADMIN_DEVICE_WINDOW_SECONDS', 900, { min: 1, max: 86_400 }),
    },
  };
}

function readBootstrap(r: EnvReader): BootstrapConfig | undefined {
  const rawEmail = r.optional('RELAYPLANE_BOOTSTRAP_EMAIL');
  // The reader trims values, so surrounding whitespace is never part of the bootstrap password.
  const rawPassword = r.optional('RELAYPLANE_BOOTSTRAP_PASSWORD');
  const tenant = r.string('RELAYPLANE_BOOTSTRAP_TENANT', 'default');
  const plan = r.oneOf('RELAYPLANE_BOOTSTRAP_PLAN', PLAN_IDS, PLANS.enterprise);
  if (rawEmail === undefined && rawPassword === undefined) return undefined;
  if (rawEmail === undefined) {
    throw new ConfigError(
      'RELAYPLANE_BOOTSTRAP_EMAIL',
      'is required when RELAYPLANE_BOOTSTRAP_PASSWORD is set',
    );
  }
  if (rawPassword === undefined) {
    throw new ConfigError(
      'RELAYPLANE_BOOTSTRAP_PASSWORD',
      'is required when RELAYPLANE_BOOTSTRAP_EMAIL is set',
    );
  }
  const email = checkEmail(rawEmail);
  if (!email.ok) throw new ConfigError('RELAYPLANE_BOOTSTRAP_EMAIL', `is invalid: ${email.message}`);
  const password = checkPassword(rawPassword);
  if (!password.ok) {
    throw new ConfigError('RELAYPLANE_BOOTSTRAP_PASSWORD', `is invalid: ${password.message}`);
  }
  const tenantName = checkTenantName(tenant);
  if (!tenantName.ok) {
    throw new ConfigError(
      'RELAYPLANE_BOOTSTRAP_TENANT',
      `is invalid: ${tenantName.message.replace('tenant_name', 'the tenant name')}`,
    );
  }
  return { email: email.value, password: password.value, tenantName: tenantName.value, plan };
}

export function readAdminConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<AdminConfig> = {},
): AdminConfig {
  const r = new EnvReader(env);
  return {
    listen: overrides.listen ?? r.address('ADMIN_LISTEN_ADDRESS', '127.0.0.1:50052'),
    maxConnectionAgeMs:
      overrides.maxConnectionAgeMs ?? readMaxConnectionAgeMs(r, 'ADMIN_GRPC_MAX_CONNECTION_AGE_MS'),
    database:
      overrides.database ??
      readDatabase(r, { url: ['ADMIN_DATABASE_URL', 'DATABASE_URL'], poolMax: 'ADMIN_DATABASE_POOL_MAX' }),
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(r, {
            url: ['ADMIN_REDIS_URL', 'REDIS_URL'],
            clusterNodes: ['ADMIN_REDIS_CLUSTER_NODES', 'RELAYPLANE_REDIS_CLUSTER_NODES'],
            prefix: ['ADMIN_REDIS_PREFIX', 'RELAYPLANE_REDIS_PREFIX'],
          }),
    billingAddress: overrides.billingAddress ?? r.target('ADMIN_BILLING_ADDRESS', '127.0.0.1:50053'),
    sessionTtlSeconds:
      overrides.sessionTtlSeconds ?? r.int('ADMIN_SESSION_TTL_SECONDS', 43_200, SESSION_TTL_RANGE),
    signupEnabled: overrides.signupEnabled ?? r.bool('RELAYPLANE_SIGNUP_ENABLED', true),
    bootstrap: 'bootstrap' in overrides ? overrides.bootstrap : readBootstrap(r),
    loginLimits: overrides.loginLimits ?? {
      maxPerAccountAndIp: r.int('ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP', 10, { min: 1, max: 100_000 }),
      maxPerAccount: r.int('ADMIN_LOGIN_MAX_PER_ACCOUNT', 100, { min: 1, max: 1_000_000 }),
      maxPerIp: r.int('ADMIN_LOGIN_MAX_PER_IP', 50, { min: 1, max: 1_000_000 }),
      maxPerDevice: r.int('ADMIN_LOGIN_MAX_PER_DEVICE', 10, { min: 1, max: 100_000 }),
      slowSeconds: r.int('ADMIN_LOGIN_SLOW_SECONDS', 10, { min: 1, max: 300 }),
      windowSeconds: r.int('ADMIN_LOGIN_WINDOW_SECONDS', 900, { min: 1, max: 86_400 }),
    },
    signupLimits: overrides.signupLimits ?? {
      maxPerIp: r.int('ADMIN_SIGNUP_MAX_PER_IP', 10, { min: 1, max: 1_000_000 }),
      windowSeconds: r.int('ADMIN_SIGNUP_WINDOW_SECONDS', 3_600, { min: 1, max: 86_400 }),
    },
    deviceFlow: overrides.deviceFlow ?? readDeviceFlow(r),
    metricsAddress:
      'metricsAddress' in overrides
        ? overrides.metricsAddress
        : readMetricsAddress(r, 'ADMIN_METRICS_ADDRESS'),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.admin),
    healthListen:
      'healthListen' in overrides
        ? overrides.healthListen
        : readHealthListen(r, 'ADMIN_HEALTH_LISTEN_ADDRESS'),
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    auditRetentionDays:
      overrides.auditRetentionDays ??
      r.int('RELAYPLANE_AUDIT_RETENTION_DAYS', DEFAULT_AUDIT_RETENTION_DAYS, { min: 1, max: 36_500 }),
    throttleIpv6Prefix:
      overrides.throttleIpv6Prefix ??
      r.int('RELAYPLANE_THROTTLE_IPV6_PREFIX', DEFAULT_THROTTLE_IPV6_PREFIX, { min: 16, max: 128 }),
    kek: overrides.kek ?? readKek(r, 'RELAYPLANE_KEK'),
    kekPrevious: overrides.kekPrevious ?? readPreviousKeks(r, 'RELAYPLANE_KEK_PREVIOUS'),
    auditSigningKeyFile:
      'auditSigningKeyFile' in overrides
        ? overrides.auditSigningKeyFile
        : r.optional('RELAYPLANE_AUDIT_SIGNING_KEY_FILE'),
    auditCheckpointSeconds:
      overrides.auditCheckpointSeconds ??
      r.int('RELAYPLANE_AUDIT_CHECKPOINT_SECONDS', 300, { min: 1, max: 86_400 }),
    perBotLimits: overrides.perBotLimits ?? {
      maxActiveKeys: r.int('ADMIN_MAX_ACTIVE_KEYS_PER_BOT', DEFAULT_MAX_ACTIVE_KEYS_PER_BOT, {
        min: 1,
        max: 100_000,
      }),
      maxActiveIdentityTokens: r.int(
        'ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT',
        DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT,
        { min: 1, max: 1_000_000 },
      ),
    },
  };
}
