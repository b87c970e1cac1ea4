import { isIP } from 'node:net';
import { ConfigError, EnvReader, LOG_LEVELS, type LogLevel } from '@relayplane/shared/config';

export interface GatewayConfig {
  host: string;
  port: number;
  /** gRPC addresses (host:port) of the services behind the gateway. */
  services: { admin: string; issuer: string; billing: string };
  /** Redis for cross-replica cache invalidation; absent in embedded mode (an in-process bus is passed instead). */
  redis: { url: string; prefix: string } | undefined;
  /**
   * Proxies (addresses or CIDRs) whose X-Forwarded-For is believed: the client IP is the first
   * address, from the right, that is not one of them. Empty: X-Forwarded-For is ignored.
   */
  trustedProxies: string[];
  /** Largest accepted request body, in bytes. */
  bodyLimitBytes: number;
  /** Deadline of each call to a service, in milliseconds. */
  rpcTimeoutMs: number;
  /** How long shutdown waits for in-flight requests before closing the remaining connections. */
  shutdownDrainMs: number;
  /** Longest an API key / relay token verification or a tenant's plan limits are cached. */
  authCacheMs: number;
  /** Longest a cached JWKS is served without asking the issuer again (bus messages refresh it sooner). */
  jwksCacheMs: number;
  logLevel: LogLevel;
}

export function readGatewayConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<GatewayConfig> = {},
): GatewayConfig {
  const r = new EnvReader(env);
  const redisUrl =
    r.has('GATEWAY_REDIS_URL') || r.has('REDIS_URL')
      ? r.url('GATEWAY_REDIS_URL', ['redis:', 'rediss:'], r.optional('REDIS_URL'))
      : undefined;
  return {
    host: overrides.host ?? r.string('HOST', '127.0.0.1'),
    port: overrides.port ?? r.int('PORT', 8080, { min: 0, max: 65535 }),
    services: overrides.services ?? {
      admin: r.address('GATEWAY_ADMIN_ADDRESS', '127.0.0.1:50052'),
      issuer: r.address('GATEWAY_ISSUER_ADDRESS', '127.0.0.1:50051'),
      billing: r.address('GATEWAY_BILLING_ADDRESS', '127.0.0.1:50053'),
    },
    redis:
      'redis' in overrides
        ? overrides.redis
        : redisUrl === undefined
          ? undefined
          : {
              url: redisUrl,
              prefix: r.string(
                'GATEWAY_REDIS_PREFIX',
                r.optional('RELAYPLANE_REDIS_PREFIX') ?? 'relayplane:',
              ),
            },
    trustedProxies:
      overrides.trustedProxies ??
      (r.optional('GATEWAY_TRUSTED_PROXIES') ?? '')
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean)
        .map((v) => {
          const [address = '', prefix] = v.split('/');
          const bits = isIP(address) === 4 ? 32 : 128;
          if (!isIP(address) || (prefix !== undefined && !(/^\d+$/.test(prefix) && Number(prefix) <= bits))) {
            throw new ConfigError('GATEWAY_TRUSTED_PROXIES', `has an invalid address or CIDR "${v}"`);
          }
          return v;
        }),
    bodyLimitBytes:
      overrides.bodyLimitBytes ??
      r.int('GATEWAY_BODY_LIMIT_BYTES', 64 * 1024, { min: 1024, max: 10 * 1024 * 1024 }),
    rpcTimeoutMs: overrides.rpcTimeoutMs ?? r.int('GATEWAY_RPC_TIMEOUT_MS', 5_000, { min: 100, max: 60_000 }),
    shutdownDrainMs:
      overrides.shutdownDrainMs ?? r.int('GATEWAY_SHUTDOWN_DRAIN_MS', 5_000, { min: 0, max: 120_000 }),
    authCacheMs: overrides.authCacheMs ?? r.int('GATEWAY_AUTH_CACHE_MS', 1_000, { min: 0, max: 1_000 }),
    jwksCacheMs: overrides.jwksCacheMs ?? r.int('GATEWAY_JWKS_CACHE_MS', 10_000, { min: 0, max: 300_000 }),
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
  };
}
