/**
 * The settings every service has the same way (settings.ts): its database, its Redis, its gRPC
 * server, its metrics listener, mutual TLS, the KEK, the log level. Each app's `settings.ts`
 * lists them with its own; the readers in config.ts and grpc-tls.ts take their names from here.
 */
import { DEFAULT_THROTTLE_IPV6_PREFIX } from './client-address.ts';
import {
  DEFAULT_DATABASE_POOL_MAX,
  DEFAULT_GRPC_MAX_CONNECTION_AGE_MS,
  DEFAULT_REDIS_PREFIX,
  KEK_BYTES,
  LOG_LEVELS,
  type Variables,
} from './config.ts';
import { DEFAULT_GRPC_TLS_REFRESH_MS, DEFAULT_TRUST_DOMAIN, GRPC_TLS_VARIABLES } from './grpc-tls.ts';
import { integer, other, type Setting, type TextSetting, text } from './settings.ts';

/** The variables a setting is read from: its own, then its fallbacks (config.ts `Variables`). */
export const variablesOf = (s: Setting): Variables => [s.env, ...(s.fallback ?? [])];

export const LOG_LEVEL = text('LOG_LEVEL', 'enum', {
  values: LOG_LEVELS,
  default: 'info',
  description: 'Log level of the process (JSON lines on stdout).',
});

export const THROTTLE_IPV6_PREFIX = integer('RELAYPLANE_THROTTLE_IPV6_PREFIX', {
  default: DEFAULT_THROTTLE_IPV6_PREFIX,
  min: 16,
  max: 128,
  description:
    'How every per-address limit groups IPv6 clients: one prefix of this length counts as one address (docs/security.md).',
});

export function databaseSettings(app: string): { url: Setting; poolMax: Setting } {
  return {
    url: other(`${app}_DATABASE_URL`, 'url', {
      required: true,
      fallback: ['DATABASE_URL'],
      description: 'PostgreSQL URL (`postgres:` or `postgresql:`) of its database schema.',
    }),
    poolMax: integer(`${app}_DATABASE_POOL_MAX`, {
      default: DEFAULT_DATABASE_POOL_MAX,
      min: 1,
      max: 200,
      description: 'Connections of its PostgreSQL pool.',
    }),
  };
}

export function redisSettings(
  app: string,
  meaning: string,
): { url: Setting; clusterNodes: Setting; prefix: Setting } {
  return {
    url: other(`${app}_REDIS_URL`, 'url', {
      fallback: ['REDIS_URL'],
      description: `One Redis server (\`redis:\` or \`rediss:\`). ${meaning}`,
    }),
    clusterNodes: other(`${app}_REDIS_CLUSTER_NODES`, 'list', {
      fallback: ['RELAYPLANE_REDIS_CLUSTER_NODES'],
      description:
        "A Redis Cluster instead of one server: comma-separated `host:port` seed nodes, or the same nodes as `redis://[user:password@]host:port` URLs (`rediss://` for TLS) when they need credentials. A URL and nodes set at the same level (the app's own, or the deployment-wide) exit 78 (docs/ARCHITECTURE.md, Redis Cluster).",
    }),
    prefix: other(`${app}_REDIS_PREFIX`, 'string', {
      fallback: ['RELAYPLANE_REDIS_PREFIX'],
      default: DEFAULT_REDIS_PREFIX,
      description:
        'Prefix of every Redis key and channel: deployments sharing a Redis keep apart by it. The same in every app, or the bus does not reach across them.',
    }),
  };
}

/** The gRPC server of a service: where it listens, how long its connections live, its plaintext health port. */
export function grpcServerSettings(
  app: string,
  listen: string,
): { listen: TextSetting; maxConnectionAge: Setting; healthListen: Setting } {
  return {
    listen: text(`${app}_LISTEN_ADDRESS`, 'address', {
      default: listen,
      description: 'Where its gRPC server listens.',
    }),
    maxConnectionAge: integer(`${app}_GRPC_MAX_CONNECTION_AGE_MS`, {
      default: DEFAULT_GRPC_MAX_CONNECTION_AGE_MS,
      min: 0,
      max: 86_400_000,
      description:
        'Each client connection is closed (GOAWAY, 90 s grace for calls in flight) after this age, so clients re-resolve DNS and find new replicas; 0: never; else at least 1000.',
    }),
    healthListen: text(`${app}_HEALTH_LISTEN_ADDRESS`, 'address', {
      description:
        "host:port of a plaintext listener serving grpc.health.v1 alone (for the kubelet's probes under mutual TLS); unset: none.",
    }),
  };
}

export function metricsSetting(app: string): Setting {
  return text(`${app}_METRICS_ADDRESS`, 'address', {
    description:
      'host:port of its Prometheus listener (`GET /metrics`, e.g. `0.0.0.0:9464`; port 0 picks one; names in docs/metrics.md); unset: none.',
  });
}

/** Mutual TLS on the gRPC links (docs/ARCHITECTURE.md, "Inside the cluster"). */
export const GRPC_TLS_SETTINGS: readonly Setting[] = [
  other(GRPC_TLS_VARIABLES.cert, 'file', {
    description:
      "PEM certificate chain of this app's SPIFFE identity; all three files or none (plaintext gRPC).",
  }),
  other(GRPC_TLS_VARIABLES.key, 'file', { description: 'PEM private key of that certificate.' }),
  other(GRPC_TLS_VARIABLES.ca, 'file', { description: 'PEM CA bundle peers are verified against.' }),
  text('RELAYPLANE_TRUST_DOMAIN', 'string', {
    default: DEFAULT_TRUST_DOMAIN,
    description: 'SPIFFE trust domain of every app (`spiffe://<domain>/<app>`).',
  }),
  integer('RELAYPLANE_GRPC_TLS_REFRESH_MS', {
    default: DEFAULT_GRPC_TLS_REFRESH_MS,
    min: 100,
    max: 3_600_000,
    description: 'How often the files are checked for a rotation (reloaded without a restart).',
  }),
];

export const KEK = other('RELAYPLANE_KEK', 'secret', {
  required: true,
  description: `Key-encryption key: base64 of ${KEK_BYTES} random bytes (\`openssl rand -base64 32\`). The issuer seals signing keys under it; admin derives its device-token and second-factor keys from it.`,
});

export const KEK_PREVIOUS = other('RELAYPLANE_KEK_PREVIOUS', 'secret', {
  description:
    'Earlier KEKs, comma-separated, each like `RELAYPLANE_KEK`: what they sealed still opens and is re-sealed under the current one (docs/ARCHITECTURE.md, "The KEK and its rotation").',
});
