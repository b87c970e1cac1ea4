import { type PlanId, SERVICES } from '@relayplane/contract/contract';
import {
  ConfigError,
  EnvReader,
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
import { variablesOf } from '@relayplane/shared/settings-common';
import { DEFAULT_WEBHOOK_RETRY_SCHEDULE, parseRetrySchedule } from '@relayplane/shared/webhook-retry';
import { checkEmail, checkPassword, checkTenantName } from './domain/validation.ts';
import { ADMIN } from './settings.ts';

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
  /** Webhook delivery (docs/webhooks.md): `RELAYPLANE_WEBHOOKS_*`. */
  webhooks: WebhookSettings;
}

/** Webhook delivery (docs/webhooks.md). */
export interface WebhookSettings {
  /** `RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK`: http:// and loopback receivers. */
  allowHttpLoopback: boolean;
  /** `RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE`: seconds before each retry. */
  retrySchedule: readonly number[];
  /** `RELAYPLANE_WEBHOOKS_DISABLE_AFTER_SECONDS`: an endpoint failing this long is disabled. */
  disableAfterSeconds: number;
  /** `RELAYPLANE_WEBHOOKS_CONCURRENCY`: attempts at once per replica. */
  concurrency: number;
  /** `RELAYPLANE_WEBHOOKS_RETENTION_DAYS`: finished deliveries are kept this long. */
  retentionDays: number;
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
  const clientIds = (r.optional(ADMIN.deviceClientIds.env) ?? String(ADMIN.deviceClientIds.default))
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  const bad = clientIds.find((id) => !CLIENT_ID.test(id));
  if (bad !== undefined || clientIds.length === 0) {
    throw new ConfigError(
      ADMIN.deviceClientIds.env,
      'must be a comma-separated list of printable client ids',
    );
  }
  return {
    clientIds,
    codeTtlSeconds: r.read(ADMIN.deviceCodeTtl),
    intervalSeconds: r.read(ADMIN.devicePollInterval),
    tokenTtlSeconds: r.read(ADMIN.cliTokenTtl),
    limits: {
      maxCodesPerIp: r.read(ADMIN.deviceMaxCodesPerIp),
      maxEntriesPerUser: r.read(ADMIN.deviceMaxEntriesPerUser),
      maxEntriesPerIp: r.read(ADMIN.deviceMaxEntriesPerIp),
      windowSeconds: r.read(ADMIN.deviceWindow),
    },
  };
}

function readBootstrap(r: EnvReader): BootstrapConfig | undefined {
  const rawEmail = r.optional(ADMIN.bootstrapEmail.env);
  // The reader trims values, so surrounding whitespace is never part of the bootstrap password.
  const rawPassword = r.optional(ADMIN.bootstrapPassword.env);
  const tenant = r.read(ADMIN.bootstrapTenant);
  const plan = r.read(ADMIN.bootstrapPlan) as PlanId;
  if (rawEmail === undefined && rawPassword === undefined) return undefined;
  if (rawEmail === undefined) {
    throw new ConfigError(ADMIN.bootstrapEmail.env, 'is required when RELAYPLANE_BOOTSTRAP_PASSWORD is set');
  }
  if (rawPassword === undefined) {
    throw new ConfigError(ADMIN.bootstrapPassword.env, 'is required when RELAYPLANE_BOOTSTRAP_EMAIL is set');
  }
  const email = checkEmail(rawEmail);
  if (!email.ok) throw new ConfigError(ADMIN.bootstrapEmail.env, `is invalid: ${email.message}`);
  const password = checkPassword(rawPassword);
  if (!password.ok) {
    throw new ConfigError(ADMIN.bootstrapPassword.env, `is invalid: ${password.message}`);
  }
  const tenantName = checkTenantName(tenant);
  if (!tenantName.ok) {
    throw new ConfigError(
      ADMIN.bootstrapTenant.env,
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
  const S = ADMIN;
  return {
    listen: overrides.listen ?? r.read(S.listen),
    maxConnectionAgeMs: overrides.maxConnectionAgeMs ?? readMaxConnectionAgeMs(r, S.maxConnectionAge.env),
    database:
      overrides.database ??
      readDatabase(r, { url: variablesOf(S.databaseUrl), poolMax: S.databasePoolMax.env }),
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(r, {
            url: variablesOf(S.redisUrl),
            clusterNodes: variablesOf(S.redisClusterNodes),
            prefix: variablesOf(S.redisPrefix),
          }),
    billingAddress: overrides.billingAddress ?? r.read(S.billingAddress),
    sessionTtlSeconds: overrides.sessionTtlSeconds ?? r.read(S.sessionTtl),
    signupEnabled: overrides.signupEnabled ?? r.read(S.signupEnabled),
    bootstrap: 'bootstrap' in overrides ? overrides.bootstrap : readBootstrap(r),
    loginLimits: overrides.loginLimits ?? {
      maxPerAccountAndIp: r.read(S.loginMaxPerAccountAndIp),
      maxPerAccount: r.read(S.loginMaxPerAccount),
      maxPerIp: r.read(S.loginMaxPerIp),
      maxPerDevice: r.read(S.loginMaxPerDevice),
      slowSeconds: r.read(S.loginSlow),
      windowSeconds: r.read(S.loginWindow),
    },
    signupLimits: overrides.signupLimits ?? {
      maxPerIp: r.read(S.signupMaxPerIp),
      windowSeconds: r.read(S.signupWindow),
    },
    deviceFlow: overrides.deviceFlow ?? readDeviceFlow(r),
    metricsAddress:
      'metricsAddress' in overrides ? overrides.metricsAddress : readMetricsAddress(r, S.metrics.env),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.admin),
    healthListen:
      'healthListen' in overrides ? overrides.healthListen : readHealthListen(r, S.healthListen.env),
    logLevel: overrides.logLevel ?? (r.read(S.logLevel) as LogLevel),
    auditRetentionDays: overrides.auditRetentionDays ?? r.read(S.auditRetention),
    throttleIpv6Prefix: overrides.throttleIpv6Prefix ?? r.read(S.throttleIpv6Prefix),
    kek: overrides.kek ?? readKek(r, 'RELAYPLANE_KEK'),
    kekPrevious: overrides.kekPrevious ?? readPreviousKeks(r, 'RELAYPLANE_KEK_PREVIOUS'),
    auditSigningKeyFile:
      'auditSigningKeyFile' in overrides
        ? overrides.auditSigningKeyFile
        : r.optional(S.auditSigningKeyFile.env),
    auditCheckpointSeconds: overrides.auditCheckpointSeconds ?? r.read(S.auditCheckpoint),
    perBotLimits: overrides.perBotLimits ?? {
      maxActiveKeys: r.read(S.maxActiveKeysPerBot),
      maxActiveIdentityTokens: r.read(S.maxActiveIdentityTokensPerBot),
    },
    webhooks: overrides.webhooks ?? readWebhookSettings(r),
  };
}

function readWebhookSettings(r: EnvReader): WebhookSettings {
  const S = ADMIN;
  const raw = r.optional(S.webhooksRetrySchedule.env);
  let retrySchedule: readonly number[] = DEFAULT_WEBHOOK_RETRY_SCHEDULE;
  if (raw !== undefined) {
    const parsed = parseRetrySchedule(raw);
    if (!parsed.ok) throw new ConfigError(S.webhooksRetrySchedule.env, parsed.message);
    retrySchedule = parsed.schedule;
  }
  return {
    allowHttpLoopback: r.read(S.webhooksAllowHttpLoopback),
    retrySchedule,
    disableAfterSeconds: r.read(S.webhooksDisableAfter),
    concurrency: r.read(S.webhooksConcurrency),
    retentionDays: r.read(S.webhooksRetention),
  };
}
