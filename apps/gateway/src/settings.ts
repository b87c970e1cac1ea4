/**
 * Every environment variable the gateway reads, declared once (packages/shared/src/settings.ts):
 * config.ts reads them, `pnpm docs:config` documents them (docs/configuration.md).
 */
import { integer, other, type Setting, text } from '@relayplane/shared/settings';
import {
  GRPC_TLS_SETTINGS,
  LOG_LEVEL,
  metricsSetting,
  redisSettings,
  THROTTLE_IPV6_PREFIX,
} from '@relayplane/shared/settings-common';

const ms = (env: string, d: number, min: number, max: number, description: string) =>
  integer(env, { default: d, min, max, description });

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

export const GATEWAY = {
  host: text('HOST', 'string', { default: '127.0.0.1', description: 'Address the HTTP server listens on.' }),
  port: integer('PORT', { default: 8080, min: 0, max: 65535, description: 'Port of the HTTP server.' }),
  admin: text('GATEWAY_ADMIN_ADDRESS', 'target', {
    default: '127.0.0.1:50052',
    description:
      'gRPC target of admin: `host:port`, `dns:///name:port` (every replica the name resolves to, round-robin) or `ipv4:a:port,b:port`.',
  }),
  issuer: text('GATEWAY_ISSUER_ADDRESS', 'target', {
    default: '127.0.0.1:50051',
    description: 'gRPC target of the issuers (same forms).',
  }),
  billing: text('GATEWAY_BILLING_ADDRESS', 'target', {
    default: '127.0.0.1:50053',
    description: 'gRPC target of billing (same forms).',
  }),
  consoleDir: other('GATEWAY_CONSOLE_DIR', 'string', {
    description:
      "Directory of the web console's build (index.html and assets/), served at `/` (docs/console.md). Unset: the @relayplane/console package's dist/ next to the gateway; none there: the console pages answer 503 and `/activate` redirects to `/device`.",
  }),
  ...redisSettings(
    'GATEWAY',
    'Invalidations between replicas (API keys, plans, JWKS) and the per-key issuance rate across gateways; unset: JWKS refreshed by time only, rates per process.',
  ),
  trustedProxies: other('GATEWAY_TRUSTED_PROXIES', 'list', {
    description:
      'Comma-separated addresses or CIDRs whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed; unset: the socket peer is the client.',
  }),
  bodyLimitBytes: integer('GATEWAY_BODY_LIMIT_BYTES', {
    default: 64 * 1024,
    min: 1024,
    max: 10 * 1024 * 1024,
    description: 'Largest accepted request body (413 above it).',
  }),
  rpcTimeoutMs: ms('GATEWAY_RPC_TIMEOUT_MS', 5_000, 100, 60_000, 'Deadline of each call to a service.'),
  issuanceStreams: integer('GATEWAY_ISSUANCE_STREAMS', {
    default: 8,
    min: 1,
    max: 64,
    description: 'Long-lived issuance streams kept to the issuers, each opened on the next replica.',
  }),
  issuanceStreamMaxAgeMs: ms(
    'GATEWAY_ISSUANCE_STREAM_MAX_AGE_MS',
    60_000,
    1_000,
    3_600_000,
    'A stream is replaced after about this age (× 0.5–1, jittered), so new replicas get their share.',
  ),
  grpcDnsMinIntervalMs: ms(
    'GATEWAY_GRPC_DNS_MIN_INTERVAL_MS',
    5_000,
    100,
    300_000,
    'Shortest time between DNS re-resolutions of a `dns:` target.',
  ),
  shutdownDelayMs: ms(
    'GATEWAY_SHUTDOWN_DELAY_MS',
    0,
    0,
    15_000,
    'After SIGTERM, how long the gateway goes on serving while it answers `/readyz` with 503 and closes each connection after its answer, so load balancers take it out before it stops accepting (Kubernetes: the time endpoints take to drop a terminating pod; the chart sets 5000). Then the drain begins.',
  ),
  shutdownDrainMs: ms(
    'GATEWAY_SHUTDOWN_DRAIN_MS',
    5_000,
    0,
    120_000,
    'How long in-flight requests get at shutdown before the remaining connections close.',
  ),
  authCacheMs: ms(
    'GATEWAY_AUTH_CACHE_MS',
    1_000,
    0,
    1_000,
    'Longest an API key, relay token or plan limits are cached (≤ 1000, so a revocation holds everywhere within a second).',
  ),
  jwksCacheMs: ms(
    'GATEWAY_JWKS_CACHE_MS',
    10_000,
    0,
    300_000,
    'Longest a cached JWKS is served without asking the issuer (bus messages refresh it sooner).',
  ),
  headersTimeoutMs: ms(
    'GATEWAY_HEADERS_TIMEOUT_MS',
    SLOW_CLIENT_DEFAULTS.headersTimeoutMs,
    1_000,
    120_000,
    'The request headers must arrive within this, else 408 and closed; at most `GATEWAY_REQUEST_TIMEOUT_MS` (docs/security.md).',
  ),
  requestTimeoutMs: ms(
    'GATEWAY_REQUEST_TIMEOUT_MS',
    SLOW_CLIENT_DEFAULTS.requestTimeoutMs,
    1_000,
    600_000,
    'The whole request must arrive within this, else 408 (long-polls and long answers are not bounded by it).',
  ),
  keepAliveTimeoutMs: ms(
    'GATEWAY_KEEP_ALIVE_TIMEOUT_MS',
    SLOW_CLIENT_DEFAULTS.keepAliveTimeoutMs,
    1_000,
    600_000,
    "Idle keep-alive connections close after this; keep it above the load balancer's idle timeout.",
  ),
  maxConnections: integer('GATEWAY_MAX_CONNECTIONS', {
    default: SLOW_CLIENT_DEFAULTS.maxConnections,
    min: 1,
    max: 1_000_000,
    description: 'Concurrent connections per gateway; over it a new connection is closed at once.',
  }),
  maxConnectionsPerIp: integer('GATEWAY_MAX_CONNECTIONS_PER_IP', {
    default: SLOW_CLIENT_DEFAULTS.maxConnectionsPerIp,
    min: 1,
    max: 1_000_000,
    description:
      'Concurrent connections of one client address (the TCP peer; an IPv6 prefix as one; trusted proxies exempt). Per hop: a proxy in front that is not trusted is one address.',
  }),
  throttleIpv6Prefix: THROTTLE_IPV6_PREFIX,
  metrics: metricsSetting('GATEWAY'),
  logLevel: LOG_LEVEL,
} as const;

/** Every variable the gateway reads, in the order documented. */
export const GATEWAY_SETTINGS: readonly Setting[] = [...Object.values(GATEWAY), ...GRPC_TLS_SETTINGS];
