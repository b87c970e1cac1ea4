import { isIP } from 'node:net';
import { SERVICES } from '@relayplane/contract/contract';
import { DEFAULT_THROTTLE_IPV6_PREFIX } from '@relayplane/shared/client-address';
import {
  ConfigError,
  EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readMetricsAddress,
  readRedis,
} from '@relayplane/shared/config';
import { type GrpcTlsConfig, readGrpcTls } from '@relayplane/shared/grpc-tls';
import type { RedisConfig } from '@relayplane/shared/redis';

export interface GatewayConfig {
  host: string;
  port: number;
  /**
   * gRPC targets of the services behind the gateway: host:port, dns:///name:port (every
   * replica the name resolves to) or a static ipv4:/ipv6: list; calls go round-robin.
   */
  services: { admin: string; issuer: string; billing: string };
  /** Redis for cross-replica cache invalidation; absent in embedded mode (an in-process bus is passed instead). */
  redis: RedisConfig | undefined;
  /**
   * Proxies (addresses or CIDRs) whose X-Forwarded-For is believed: the client IP is the first
   * address, from the right, that is not one of them. Empty: X-Forwarded-For is ignored.
   */
  trustedProxies: string[];
  /** Largest accepted request body, in bytes. */
  bodyLimitBytes: number;
  /** Deadline of each call to a service, in milliseconds. */
  rpcTimeoutMs: number;
  /** Long-lived issuance streams kept to the issuers; each opens on the next replica (round-robin). */
  issuanceStreams: number;
  /** A stream is replaced after about this age (×0.5–1, jittered), so new replicas get their share. */
  issuanceStreamMaxAgeMs: number;
  /** Shortest time between DNS re-resolutions of a dns: target. */
  grpcDnsMinIntervalMs: number;
  /** How long shutdown waits for in-flight requests before closing the remaining connections. */
  shutdownDrainMs: number;
  /** Longest an API key / relay token verification or a tenant's plan limits are cached. */
  authCacheMs: number;
  /** Longest a cached JWKS is served without asking the issuer again (bus messages refresh it sooner). */
  jwksCacheMs: number;
  /**
   * A connection must have sent its request headers within this (slow or silent clients are
   * closed, 408). `GATEWAY_HEADERS_TIMEOUT_MS`; at most `requestTimeoutMs`.
   */
  headersTimeoutMs: number;
  /**
   * A request must have been received in full (headers and body) within this: a trickling body
   * is cut with 408. Measured until the request is received, so long-polls and long answers are
   * not bounded by it. `GATEWAY_REQUEST_TIMEOUT_MS`.
   */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. `GATEWAY_KEEP_ALIVE_TIMEOUT_MS`. */
  keepAliveTimeoutMs: number;
  /** Concurrent connections per gateway; over it a new connection is closed at once. `GATEWAY_MAX_CONNECTIONS`. */
  maxConnections: number;
  /**
   * Concurrent connections one client address may hold (`GATEWAY_MAX_CONNECTIONS_PER_IP`; an IPv6
   * address counts by its /64, `RELAYPLANE_THROTTLE_IPV6_PREFIX`); over it a new connection is
   * closed at once. Trusted proxies (`GATEWAY_TRUSTED_PROXIES`) are not capped per address.
   */
  maxConnectionsPerIp: number;
  /** `RELAYPLANE_THROTTLE_IPV6_PREFIX`: how the per-address connection cap groups IPv6. */
  throttleIpv6Prefix: number;
  /** host:port of the Prometheus metrics listener (`GATEWAY_METRICS_ADDRESS`); undefined: none. */
  metricsAddress: string | undefined;
  /** Mutual TLS on this service's gRPC links (`RELAYPLANE_GRPC_TLS_*`); undefined: plaintext. */
  grpcTls: GrpcTlsConfig | undefined;
  logLevel: LogLevel;
}

export function readGatewayConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<GatewayConfig> = {},
): GatewayConfig {
  const r = new EnvReader(env);
  return {
    host: overrides.host ?? r.string('HOST', '127.0.0.1'),
    port: overrides.port ?? r.int('PORT', 8080, { min: 0, max: 65535 }),
    services: overrides.services ?? {
      admin: r.target('GATEWAY_ADMIN_ADDRESS', '127.0.0.1:50052'),
      issuer: r.target('GATEWAY_ISSUER_ADDRESS', '127.0.0.1:50051'),
      billing: r.target('GATEWAY_BILLING_ADDRESS', '127.0.0.1:50053'),
    },
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(r, {
            url: ['GATEWAY_REDIS_URL', 'REDIS_URL'],
            clusterNodes: ['GATEWAY_REDIS_CLUSTER_NODES', 'RELAYPLANE_REDIS_CLUSTER_NODES'],
            prefix: ['GATEWAY_REDIS_PREFIX', 'RELAYPLANE_REDIS_PREFIX'],
          }),
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
    issuanceStreams: overrides.issuanceStreams ?? r.int('GATEWAY_ISSUANCE_STREAMS', 8, { min: 1, max: 64 }),
    issuanceStreamMaxAgeMs:
      overrides.issuanceStreamMaxAgeMs ??
      r.int('GATEWAY_ISSUANCE_STREAM_MAX_AGE_MS', 60_000, { min: 1_000, max: 3_600_000 }),
    grpcDnsMinIntervalMs:
      overrides.grpcDnsMinIntervalMs ??
      r.int('GATEWAY_GRPC_DNS_MIN_INTERVAL_MS', 5_000, { min: 100, max: 300_000 }),
    shutdownDrainMs:
      overrides.shutdownDrainMs ?? r.int('GATEWAY_SHUTDOWN_DRAIN_MS', 5_000, { min: 0, max: 120_000 }),
    authCacheMs: overrides.authCacheMs ?? r.int('GATEWAY_AUTH_CACHE_MS', 1_000, { min: 0, max: 1_000 }),
    jwksCacheMs: overrides.jwksCacheMs ?? r.int('GATEWAY_JWKS_CACHE_MS', 10_000, { min: 0, max: 300_000 }),
    ...slowClientLimits(r, overrides),
    metricsAddress:
      'metricsAddress' in overrides
        ? overrides.metricsAddress
        : readMetricsAddress(r, 'GATEWAY_METRICS_ADDRESS'),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.gateway),
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
  };
}

/** Defaults of the slow and idle client limits (docs/security.md). */
export const SLOW_CLIENT_DEFAULTS = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  // Above the 60 s idle timeout of AWS ALB and ingress-nginx toward backends (docs/security.md).
  keepAliveTimeoutMs: 72_000,
  maxConnections: 10_000,
  // A browser holds 6 per origin, an HTTP/1.1 client pool a few dozen; a NAT of a few hundred
  // users stays under it. Far below the global cap: one address cannot take the gateway.
  maxConnectionsPerIp: 256,
} as const;

function slowClientLimits(
  r: EnvReader,
  overrides: Partial<GatewayConfig>,
): Pick<
  GatewayConfig,
  | 'headersTimeoutMs'
  | 'requestTimeoutMs'
  | 'keepAliveTimeoutMs'
  | 'maxConnections'
  | 'maxConnectionsPerIp'
  | 'throttleIpv6Prefix'
> {
  const d = SLOW_CLIENT_DEFAULTS;
  const limits = {
    headersTimeoutMs:
      overrides.headersTimeoutMs ??
      r.int('GATEWAY_HEADERS_TIMEOUT_MS', d.headersTimeoutMs, { min: 1_000, max: 120_000 }),
    requestTimeoutMs:
      overrides.requestTimeoutMs ??
      r.int('GATEWAY_REQUEST_TIMEOUT_MS', d.requestTimeoutMs, { min: 1_000, max: 600_000 }),
    keepAliveTimeoutMs:
      overrides.keepAliveTimeoutMs ??
      r.int('GATEWAY_KEEP_ALIVE_TIMEOUT_MS', d.keepAliveTimeoutMs, { min: 1_000, max: 600_000 }),
    maxConnections:
      overrides.maxConnections ??
      r.int('GATEWAY_MAX_CONNECTIONS', d.maxConnections, { min: 1, max: 1_000_000 }),
    maxConnectionsPerIp:
      overrides.maxConnectionsPerIp ??
      r.int('GATEWAY_MAX_CONNECTIONS_PER_IP', d.maxConnectionsPerIp, { min: 1, max: 1_000_000 }),
    throttleIpv6Prefix:
      overrides.throttleIpv6Prefix ??
      r.int('RELAYPLANE_THROTTLE_IPV6_PREFIX', DEFAULT_THROTTLE_IPV6_PREFIX, { min: 16, max: 128 }),
  };
  // Node refuses a headers timeout longer than the request timeout (and it could never apply).
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new ConfigError(
      'GATEWAY_HEADERS_TIMEOUT_MS',
      `(${limits.headersTimeoutMs}) must not exceed GATEWAY_REQUEST_TIMEOUT_MS (${limits.requestTimeoutMs})`,
    );
  }
  return limits;
}
