import {
  ConfigError,
  EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readMaxConnectionAgeMs,
  readMetricsAddress,
} from '@relayplane/shared/config';
import type { DatabaseConfig } from '@relayplane/shared/db';
import type { RedisConfig } from '@relayplane/shared/redis';
import { checkEmail, checkPassword, checkTenantName } from './domain/validation.ts';

/** Plans the bootstrap tenant may be put on (billing owns the catalogue; these ids are the contract). */
export const BOOTSTRAP_PLANS = ['free', 'pro', 'enterprise'] as const;
export type BootstrapPlan = (typeof BOOTSTRAP_PLANS)[number];

/** The first tenant and its owner, created at start when no user exists. */
export interface BootstrapConfig {
  email: string;
  password: string;
  tenantName: string;
  plan: BootstrapPlan;
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
  /** Login attempt limits (per account and per client IP, fixed window). */
  loginLimits: LoginLimits;
  /** host:port of the Prometheus metrics listener (`ADMIN_METRICS_ADDRESS`); undefined: none. */
  metricsAddress: string | undefined;
  logLevel: LogLevel;
}

/** Attempts allowed per window; one more answers `rate_limited` with the time left in the window. */
export interface LoginLimits {
  maxPerAccount: number;
  maxPerIp: number;
  windowSeconds: number;
}

export const SESSION_TTL_RANGE = { min: 300, max: 2_592_000 } as const;

function readBootstrap(r: EnvReader): BootstrapConfig | undefined {
  const rawEmail = r.optional('RELAYPLANE_BOOTSTRAP_EMAIL');
  // The reader trims values, so surrounding whitespace is never part of the bootstrap password.
  const rawPassword = r.optional('RELAYPLANE_BOOTSTRAP_PASSWORD');
  const tenant = r.string('RELAYPLANE_BOOTSTRAP_TENANT', 'default');
  const plan = r.oneOf('RELAYPLANE_BOOTSTRAP_PLAN', BOOTSTRAP_PLANS, 'enterprise');
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

function readRedis(r: EnvReader): RedisConfig | undefined {
  if (!r.has('ADMIN_REDIS_URL') && !r.has('REDIS_URL')) return undefined;
  return {
    url: r.url('ADMIN_REDIS_URL', ['redis:', 'rediss:'], r.optional('REDIS_URL')),
    prefix: r.string('ADMIN_REDIS_PREFIX', r.optional('RELAYPLANE_REDIS_PREFIX') ?? 'relayplane:'),
  };
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
    database: overrides.database ?? {
      kind: 'postgres',
      url: r.url('ADMIN_DATABASE_URL', ['postgres:', 'postgresql:'], r.optional('DATABASE_URL')),
      poolMax: r.int('ADMIN_DATABASE_POOL_MAX', 10, { min: 1, max: 200 }),
    },
    redis: 'redis' in overrides ? overrides.redis : readRedis(r),
    billingAddress: overrides.billingAddress ?? r.target('ADMIN_BILLING_ADDRESS', '127.0.0.1:50053'),
    sessionTtlSeconds:
      overrides.sessionTtlSeconds ?? r.int('ADMIN_SESSION_TTL_SECONDS', 43_200, SESSION_TTL_RANGE),
    signupEnabled: overrides.signupEnabled ?? r.bool('RELAYPLANE_SIGNUP_ENABLED', true),
    bootstrap: 'bootstrap' in overrides ? overrides.bootstrap : readBootstrap(r),
    loginLimits: overrides.loginLimits ?? {
      maxPerAccount: r.int('ADMIN_LOGIN_MAX_PER_ACCOUNT', 10, { min: 1, max: 100_000 }),
      maxPerIp: r.int('ADMIN_LOGIN_MAX_PER_IP', 50, { min: 1, max: 1_000_000 }),
      windowSeconds: r.int('ADMIN_LOGIN_WINDOW_SECONDS', 900, { min: 1, max: 86_400 }),
    },
    metricsAddress:
      'metricsAddress' in overrides
        ? overrides.metricsAddress
        : readMetricsAddress(r, 'ADMIN_METRICS_ADDRESS'),
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
  };
}
