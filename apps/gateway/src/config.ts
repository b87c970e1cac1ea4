import { isIP } from 'node:net';
import { SERVICES } from '@relayplane/contract/contract';
import {
  ConfigError,
  EnvReader,
  type LogLevel,
  readMetricsAddress,
  readRedis,
} from '@relayplane/shared/config';
import { type GrpcTlsConfig, readGrpcTls } from '@relayplane/shared/grpc-tls';
import type { RedisConfig } from '@relayplane/shared/redis';
import { variablesOf } from '@relayplane/shared/settings-common';
import { GATEWAY } from './settings.ts';

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
  /**
   * After SIGTERM, how long the gateway goes on serving, not ready and closing each connection
   * after its answer, before it stops accepting (load balancers take it out meanwhile).
   */
  shutdownDelayMs: number;
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
  /** The web console's build directory (`GATEWAY_CONSOLE_DIR`); undefined: the console package's dist/ (console.ts). */
  consoleDir?: string | undefined;
}

export function readGatewayConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<GatewayConfig> = {},
): GatewayConfig {
  const r = new EnvReader(env);
  const S = GATEWAY;
  return {
    host: overrides.host ?? r.read(S.host),
    port: overrides.port ?? r.read(S.port),
    services: overrides.services ?? {
      admin: r.read(S.admin),
      issuer: r.read(S.issuer),
      billing: r.read(S.billing),
    },
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(r, {
            url: variablesOf(S.url),
            clusterNodes: variablesOf(S.clusterNodes),
            prefix: variablesOf(S.prefix),
          }),
    trustedProxies: overrides.trustedProxies ?? readTrustedProxies(r),
    bodyLimitBytes: overrides.bodyLimitBytes ?? r.read(S.bodyLimitBytes),
    rpcTimeoutMs: overrides.rpcTimeoutMs ?? r.read(S.rpcTimeoutMs),
    issuanceStreams: overrides.issuanceStreams ?? r.read(S.issuanceStreams),
    issuanceStreamMaxAgeMs: overrides.issuanceStreamMaxAgeMs ?? r.read(S.issuanceStreamMaxAgeMs),
    grpcDnsMinIntervalMs: overrides.grpcDnsMinIntervalMs ?? r.read(S.grpcDnsMinIntervalMs),
    ...shutdownTimes(r, overrides),
    authCacheMs: overrides.authCacheMs ?? r.read(S.authCacheMs),
    jwksCacheMs: overrides.jwksCacheMs ?? r.read(S.jwksCacheMs),
    ...slowClientLimits(r, overrides),
    metricsAddress:
      'metricsAddress' in overrides ? overrides.metricsAddress : readMetricsAddress(r, S.metrics.env),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.gateway),
    logLevel: overrides.logLevel ?? (r.read(S.logLevel) as LogLevel),
    consoleDir: 'consoleDir' in overrides ? overrides.consoleDir : r.optional(S.consoleDir.env),
  };
}

/** The whole shutdown (delay, then drain) must end before the process gives up on it (runMain: 25 s). */
const SHUTDOWN_BUDGET_MS = 24_000;

function shutdownTimes(
  r: EnvReader,
  overrides: Partial<GatewayConfig>,
): Pick<GatewayConfig, 'shutdownDelayMs' | 'shutdownDrainMs'> {
  const S = GATEWAY;
  const times = {
    shutdownDelayMs: overrides.shutdownDelayMs ?? r.read(S.shutdownDelayMs),
    shutdownDrainMs: overrides.shutdownDrainMs ?? r.read(S.shutdownDrainMs),
  };
  if (times.shutdownDelayMs + times.shutdownDrainMs > SHUTDOWN_BUDGET_MS) {
    throw new ConfigError(
      S.shutdownDelayMs.env,
      `(${times.shutdownDelayMs}) plus ${S.shutdownDrainMs.env} (${times.shutdownDrainMs}) must not exceed ${SHUTDOWN_BUDGET_MS} ms: the process exits 1 if its shutdown takes longer than 25 s`,
    );
  }
  return times;
}

/** `GATEWAY_TRUSTED_PROXIES`: addresses or CIDRs, each checked. */
function readTrustedProxies(r: EnvReader): string[] {
  const name = GATEWAY.trustedProxies.env;
  return (r.optional(name) ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean)
    .map((v) => {
      const [address = '', prefix] = v.split('/');
      const bits = isIP(address) === 4 ? 32 : 128;
      if (!isIP(address) || (prefix !== undefined && !(/^\d+$/.test(prefix) && Number(prefix) <= bits))) {
        throw new ConfigError(name, `has an invalid address or CIDR "${v}"`);
      }
      return v;
    });
}

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
  const S = GATEWAY;
  const limits = {
    headersTimeoutMs: overrides.headersTimeoutMs ?? r.read(S.headersTimeoutMs),
    requestTimeoutMs: overrides.requestTimeoutMs ?? r.read(S.requestTimeoutMs),
    keepAliveTimeoutMs: overrides.keepAliveTimeoutMs ?? r.read(S.keepAliveTimeoutMs),
    maxConnections: overrides.maxConnections ?? r.read(S.maxConnections),
    maxConnectionsPerIp: overrides.maxConnectionsPerIp ?? r.read(S.maxConnectionsPerIp),
    throttleIpv6Prefix: overrides.throttleIpv6Prefix ?? r.read(S.throttleIpv6Prefix),
  };
  // Node refuses a headers timeout longer than the request timeout (and it could never apply).
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new ConfigError(
      S.headersTimeoutMs.env,
      `(${limits.headersTimeoutMs}) must not exceed ${S.requestTimeoutMs.env} (${limits.requestTimeoutMs})`,
    );
  }
  return limits;
}
