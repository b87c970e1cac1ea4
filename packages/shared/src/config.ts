/**
 * Reading configuration from the environment. Each service's `config.ts` reads every
 * variable it needs once at start through an `EnvReader`; the first bad or missing value
 * stops the process with a message naming the variable.
 *
 * The settings every service has the same way (its database, its Redis, a YAML file named by
 * a variable) go through the readers at the end of this module, so that defaults and the
 * fallback from a service's own variable to the deployment-wide one work alike everywhere.
 * The variable names stay written out in each service's `config.ts`: they are the documented
 * contract (docs/configuration.md, the Helm chart), and a reader of that file sees them all.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from './config-error.ts';
import type { DatabaseConfig } from './db.ts';
import type { RedisClusterAuth, RedisConfig, RedisNode } from './redis.ts';
import type { BooleanSetting, IntegerSetting, TextSetting } from './settings.ts';

export { ConfigError };

type Env = Readonly<Record<string, string | undefined>>;

export class EnvReader {
  readonly #env: Env;
  constructor(env: Env) {
    this.#env = env;
  }

  #raw(name: string): string | undefined {
    const v = this.#env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  }

  has(name: string): boolean {
    return this.#raw(name) !== undefined;
  }

  string(name: string, fallback?: string): string {
    const v = this.#raw(name) ?? fallback;
    if (v === undefined) throw new ConfigError(name, 'is required but not set');
    return v;
  }

  optional(name: string): string | undefined {
    return this.#raw(name);
  }

  int(name: string, fallback: number | undefined, range: { min?: number; max?: number } = {}): number {
    const raw = this.#raw(name);
    if (raw === undefined) {
      if (fallback === undefined) throw new ConfigError(name, 'is required but not set');
      return fallback;
    }
    if (!/^-?\d+$/.test(raw)) throw new ConfigError(name, `must be an integer (got "${raw}")`);
    const n = Number(raw);
    if ((range.min !== undefined && n < range.min) || (range.max !== undefined && n > range.max)) {
      throw new ConfigError(name, `must be between ${range.min ?? '-∞'} and ${range.max ?? '∞'} (got ${n})`);
    }
    return n;
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.#raw(name);
    if (raw === undefined) return fallback;
    if (/^(1|true|yes|on)$/i.test(raw)) return true;
    if (/^(0|false|no|off)$/i.test(raw)) return false;
    throw new ConfigError(name, `must be true or false (got "${raw}")`);
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.#raw(name) ?? fallback;
    if (!(allowed as readonly string[]).includes(raw)) {
      throw new ConfigError(name, `must be one of ${allowed.join(', ')} (got "${raw}")`);
    }
    return raw as T;
  }

  url(name: string, protocols: readonly string[], fallback?: string): string {
    const raw = this.#raw(name) ?? fallback;
    if (raw === undefined) throw new ConfigError(name, 'is required but not set');
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      throw new ConfigError(name, 'must be a URL');
    }
    if (!protocols.includes(parsed.protocol)) {
      throw new ConfigError(name, `must be a ${protocols.join(' or ')} URL (got ${parsed.protocol})`);
    }
    return raw;
  }

  /** A declared setting (settings.ts), read with the kind, default and bounds it declares. */
  read(s: IntegerSetting): number;
  read(s: BooleanSetting): boolean;
  read(s: TextSetting): string;
  read(s: IntegerSetting | BooleanSetting | TextSetting): number | boolean | string {
    switch (s.kind) {
      case 'integer':
        return this.int(s.env, s.default, { min: s.min, max: s.max });
      case 'boolean':
        return this.bool(s.env, s.default);
      case 'enum':
        return this.oneOf(s.env, s.values ?? [], s.default ?? '');
      case 'url':
        return this.url(s.env, s.protocols ?? [], s.default);
      case 'address':
        return this.address(s.env, s.default);
      case 'target':
        return this.target(s.env, s.default);
      default:
        return this.string(s.env, s.default);
    }
  }

  /** A declared setting without a default: undefined when unset, else read as `read` does. */
  readOptional(s: TextSetting): string | undefined {
    return this.has(s.env) ? this.read(s) : undefined;
  }

  /** host:port of a gRPC peer. */
  address(name: string, fallback?: string): string {
    const raw = this.#raw(name) ?? fallback;
    if (raw === undefined) throw new ConfigError(name, 'is required but not set');
    if (!/^[A-Za-z0-9.\-[\]:]+:\d{1,5}$/.test(raw))
      throw new ConfigError(name, `must be host:port (got "${raw}")`);
    return raw;
  }

  /**
   * A gRPC client target: `host:port`, `dns:///host:port` (every address the name resolves
   * to, e.g. a Kubernetes headless Service; `dns://resolver-ip:port/host:port` asks that DNS
   * server, which grpc-js does only with GRPC_NODE_USE_ALTERNATIVE_RESOLVER=true), or a static list `ipv4:a:port,b:port` / `ipv6:[a]:port,[b]:port`. The client
   * balances round-robin over all of them.
   */
  target(name: string, fallback?: string): string {
    const raw = this.#raw(name) ?? fallback;
    if (raw === undefined) throw new ConfigError(name, 'is required but not set');
    if (!isGrpcTarget(raw)) {
      throw new ConfigError(
        name,
        `must be host:port, dns:///host:port or ipv4:/ipv6: followed by a comma-separated host:port list (got "${raw}")`,
      );
    }
    return raw;
  }

  /** A base64 value that must decode to exactly `bytes` bytes. */
  base64Key(name: string, bytes: number): Buffer | undefined {
    const raw = this.#raw(name);
    if (raw === undefined) return undefined;
    const buf = Buffer.from(raw, 'base64');
    if (buf.length !== bytes || buf.toString('base64').replace(/=+$/, '') !== raw.replace(/=+$/, '')) {
      throw new ConfigError(name, `must be ${bytes} bytes, base64-encoded`);
    }
    return buf;
  }
}

/** Bytes of a key-encryption key (`RELAYPLANE_KEK`): an AES-256 key. */
export const KEK_BYTES = 32;

/**
 * `RELAYPLANE_KEK`, required: the key-encryption key (base64 of 32 bytes). The issuer seals
 * signing keys under it; admin derives its own keys from it (HKDF, one label per use).
 */
export function readKek(r: EnvReader, name: 'RELAYPLANE_KEK'): Buffer {
  const kek = r.base64Key(name, KEK_BYTES);
  if (!kek) {
    throw new ConfigError(
      name,
      `is required but not set (base64 of ${KEK_BYTES} random bytes, e.g. \`openssl rand -base64 32\`)`,
    );
  }
  return kek;
}

/**
 * `RELAYPLANE_KEK_PREVIOUS`: comma-separated KEKs, each as `RELAYPLANE_KEK` (base64 of 32
 * bytes); spaces around an entry are ignored, an empty entry is an error. Unset or empty: none.
 * The message names the entry by position, never its value.
 */
export function readPreviousKeks(r: EnvReader, name: 'RELAYPLANE_KEK_PREVIOUS'): Buffer[] {
  const raw = r.optional(name);
  if (raw === undefined) return [];
  return raw.split(',').map((entry, i) => {
    const text = entry.trim();
    const kek = Buffer.from(text, 'base64');
    if (
      text === '' ||
      kek.length !== KEK_BYTES ||
      kek.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, '')
    ) {
      throw new ConfigError(
        name,
        `entry ${i + 1} must be ${KEK_BYTES} bytes, base64-encoded (comma-separated keys, each like RELAYPLANE_KEK)`,
      );
    }
    return kek;
  });
}

/** A log level shared by every service's config. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const HOST_PORT = /^[A-Za-z0-9.-]+:\d{1,5}$/;
const IPV4_PORT = /^\d{1,3}(\.\d{1,3}){3}:\d{1,5}$/;
const IPV6_PORT = /^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/;

/** Whether `raw` is a gRPC target this platform supports (see `EnvReader.target`). */
export function isGrpcTarget(raw: string): boolean {
  if (HOST_PORT.test(raw) || IPV6_PORT.test(raw)) return true;
  const dns = /^dns:(?:\/\/([A-Za-z0-9.\-:[\]]*))?\/([^/]+)$/.exec(raw);
  if (dns) {
    const [, authority, hostPort = ''] = dns;
    if (authority && !(HOST_PORT.test(authority) || IPV6_PORT.test(authority))) return false;
    return HOST_PORT.test(hostPort);
  }
  const list = /^(ipv4|ipv6):(.+)$/.exec(raw);
  if (list) {
    const pattern = list[1] === 'ipv4' ? IPV4_PORT : IPV6_PORT;
    return (list[2] ?? '').split(',').every((a) => pattern.test(a));
  }
  return false;
}

/** Default max connection age of the services' gRPC servers, in milliseconds. */
export const DEFAULT_GRPC_MAX_CONNECTION_AGE_MS = 120_000;

/**
 * `<PREFIX>_GRPC_MAX_CONNECTION_AGE_MS`: 0 (connections live until closed) or 1 s to 1 day.
 * Clients reconnect after it and re-resolve DNS, which is how they find new replicas.
 */
export function readMaxConnectionAgeMs(r: EnvReader, name: string): number {
  const value = r.int(name, DEFAULT_GRPC_MAX_CONNECTION_AGE_MS, { min: 0, max: 86_400_000 });
  if (value !== 0 && value < 1_000) throw new ConfigError(name, 'must be 0 (never) or at least 1000 ms');
  return value;
}

/**
 * `<APP>_METRICS_ADDRESS`: host:port of the Prometheus metrics listener (`GET /metrics`;
 * port 0 picks a free one). Unset or empty: no metrics listener.
 */
export function readMetricsAddress(r: EnvReader, name: string): string | undefined {
  return r.has(name) ? r.address(name) : undefined;
}

/**
 * The variables one setting is read from, in precedence order: the service's own first
 * (`ISSUER_REDIS_URL`), then the deployment-wide ones (`REDIS_URL`). The first one set wins;
 * a missing or bad value fails naming the service's own variable.
 */
export type Variables = readonly [own: string, ...shared: string[]];

function fallbackOf(r: EnvReader, [, ...shared]: Variables): string | undefined {
  for (const name of shared) {
    const value = r.optional(name);
    if (value !== undefined) return value;
  }
  return undefined;
}

const POSTGRES_PROTOCOLS = ['postgres:', 'postgresql:'];
const REDIS_PROTOCOLS = ['redis:', 'rediss:'];
export const DEFAULT_DATABASE_POOL_MAX = 10;
export const DEFAULT_REDIS_PREFIX = 'relayplane:';

/** A service's PostgreSQL database: its URL (required) and connection pool size. */
export function readDatabase(r: EnvReader, names: { url: Variables; poolMax: string }): DatabaseConfig {
  return {
    kind: 'postgres',
    url: r.url(names.url[0], POSTGRES_PROTOCOLS, fallbackOf(r, names.url)),
    poolMax: r.int(names.poolMax, DEFAULT_DATABASE_POOL_MAX, { min: 1, max: 200 }),
  };
}

/**
 * A service's Redis: one server (its URL) or a Redis Cluster (its seed nodes), and the key
 * prefix (default `relayplane:`). Undefined when none of the variables is set (the service then
 * runs on its in-process twins), unless the service cannot do without Redis (`required`): then
 * it fails naming its own URL variable.
 *
 * URL or cluster, decided like every other setting: the service's own variables
 * (`ISSUER_REDIS_URL`, `ISSUER_REDIS_CLUSTER_NODES`) win over the deployment-wide ones
 * (`REDIS_URL`, `RELAYPLANE_REDIS_CLUSTER_NODES`), so one app can use a cluster while the others
 * keep the deployment's server, or the other way round. Both kinds set at the same level (the
 * service's own, or the deployment-wide) is a configuration error naming both: which one was
 * meant cannot be guessed.
 */
export function readRedis(
  r: EnvReader,
  names: { url: Variables; clusterNodes?: Variables; prefix: Variables },
  options: { required?: boolean } = {},
): RedisConfig | undefined {
  const [ownUrl, ...sharedUrls] = names.url;
  const [ownNodes, ...sharedNodes] = names.clusterNodes ?? [];
  const levels = [
    { urls: [ownUrl], nodes: ownNodes === undefined ? [] : [ownNodes] },
    { urls: sharedUrls, nodes: sharedNodes },
  ];
  for (const level of levels) {
    const url = level.urls.find((name) => r.has(name));
    const nodes = level.nodes.find((name) => r.has(name));
    if (url !== undefined && nodes !== undefined) {
      throw new ConfigError(
        nodes,
        `and ${url} are both set: set ${url} for one Redis server or ${nodes} for a Redis Cluster, not both`,
      );
    }
    if (nodes !== undefined && ownNodes !== undefined) {
      const cluster = parseClusterNodes(ownNodes, r.string(nodes));
      return {
        clusterNodes: cluster.nodes,
        ...(cluster.auth ? { clusterAuth: cluster.auth } : {}),
        prefix: readPrefix(r, names),
      };
    }
    if (url !== undefined) break;
  }
  if (!options.required && !names.url.some((name) => r.has(name))) return undefined;
  return {
    url: r.url(names.url[0], REDIS_PROTOCOLS, fallbackOf(r, names.url)),
    prefix: readPrefix(r, names),
  };
}

function readPrefix(r: EnvReader, names: { prefix: Variables }): string {
  return r.string(names.prefix[0], fallbackOf(r, names.prefix) ?? DEFAULT_REDIS_PREFIX);
}

const CLUSTER_NODE = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/;

/**
 * `host:port,host:port,…` (IPv6 as `[addr]:port`), or the same nodes as URLs
 * (`redis://[user:password@]host:port`, `rediss://…` for TLS) when the cluster needs credentials:
 * at least one node, each with a port of 1–65535. Every node of a cluster is reached alike, so the
 * URLs must agree on scheme and credentials, and plain and URL entries are not mixed.
 */
function parseClusterNodes(variable: string, raw: string): { nodes: RedisNode[]; auth?: RedisClusterAuth } {
  const nodes: RedisNode[] = [];
  const auths = new Set<string>();
  let auth: RedisClusterAuth | undefined;
  const entries = raw.split(',').map((e) => e.trim());
  const urls = entries.filter((e) => /^[a-z]+:\/\//i.test(e)).length;
  if (urls > 0 && urls < entries.length) {
    throw new ConfigError(
      variable,
      'mixes host:port nodes and URLs: give every node as host:port, or every node as a redis:// or rediss:// URL',
    );
  }
  for (const entry of entries) {
    let hostPort = entry;
    if (urls > 0) {
      let url: URL;
      try {
        url = new URL(entry);
      } catch {
        throw new ConfigError(variable, `has a node that is not a URL (node ${nodes.length + 1})`);
      }
      if (
        !REDIS_PROTOCOLS.includes(url.protocol) ||
        !url.port ||
        (url.pathname !== '' && url.pathname !== '/')
      ) {
        throw new ConfigError(
          variable,
          `node ${nodes.length + 1} must be redis://[user:password@]host:port or rediss://… (no database: a cluster has only database 0)`,
        );
      }
      const nodeAuth: RedisClusterAuth = {
        ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
        ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
        tls: url.protocol === 'rediss:',
      };
      auths.add(JSON.stringify(nodeAuth));
      auth = nodeAuth;
      hostPort = `${url.hostname}:${url.port}`;
    }
    const port = CLUSTER_NODE.exec(hostPort)?.[1];
    if (port === undefined || Number(port) < 1 || Number(port) > 65_535) {
      // The entry is not echoed when it is a URL: it may hold a password.
      throw new ConfigError(
        variable,
        urls > 0
          ? `node ${nodes.length + 1} has no valid host:port`
          : `must be a comma-separated list of host:port seed nodes (got "${entry}" in "${raw}")`,
      );
    }
    const host = hostPort.slice(0, hostPort.length - port.length - 1).replace(/^\[(.*)\]$/, '$1');
    nodes.push({ host, port: Number(port) });
  }
  if (auths.size > 1) {
    throw new ConfigError(
      variable,
      'gives its nodes different schemes or credentials: every node of a cluster is reached alike',
    );
  }
  return auth ? { nodes, auth } : { nodes };
}

/**
 * The YAML (or JSON, which is YAML) file `variable` names, parsed and handed to `parse`, which
 * validates the document and throws an Error whose message says what is wrong where. Undefined
 * when the variable is unset. An unreadable file, bad YAML or a refused document fails naming
 * the variable and the file.
 */
export function readYamlFile<T>(r: EnvReader, variable: string, parse: (doc: unknown) => T): T | undefined {
  const path = r.optional(variable);
  if (path === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      variable,
      `names a file that cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}: ${path})`,
    );
  }
  try {
    return parse(parseYaml(text));
  } catch (err) {
    throw new ConfigError(variable, `(${path}) is invalid: ${(err as Error).message}`);
  }
}
