/**
 * Redis factory: one place that sets connection policy for every service.
 *
 * One server (`url`) or a Redis Cluster (`clusterNodes`, seed nodes): with a cluster every
 * connection made here is an ioredis `Cluster`, which routes each command to the master of its
 * key's slot. The services type it as `Redis`: they use commands, scripts (`defineCommand`,
 * EVAL/EVALSHA), MULTI, pub/sub, `status` and the connection events, which the cluster client
 * has with the same signatures. The one call that differs, `duplicate`, goes through
 * `duplicateConnection` below. What the cluster asks of the keys (a script's or a MULTI's keys
 * share a hash tag) is kept by each service's keys module; see docs/ARCHITECTURE.md, "Redis
 * Cluster".
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { Bus } from './bus.ts';
import type { Logger } from './logger.ts';
import { retryUntilDone } from './readiness.ts';
import { traceRedis } from './tracing-redis.ts';

/** A seed node of a Redis Cluster: the cluster client learns the others from it. */
export interface RedisNode {
  host: string;
  port: number;
}

export type RedisConfig = {
  /** Prefix for every key and channel this process uses (tests isolate with it). */
  prefix: string;
} & (
  | { url: string; clusterNodes?: undefined }
  /**
   * A Redis Cluster, reached through any of these nodes, with the nodes' credentials (ACL user
   * and password, as in a URL) and TLS (`rediss://` nodes) when given.
   */
  | { url?: undefined; clusterNodes: readonly RedisNode[]; clusterAuth?: RedisClusterAuth }
);

/** How every node of a cluster is reached: the same credentials and TLS for all of them. */
export interface RedisClusterAuth {
  username?: string;
  password?: string;
  tls: boolean;
}

/** The connection options of every node of a cluster `config` gives credentials or TLS for. */
function clusterNodeOptions(auth: RedisClusterAuth | undefined): Partial<RedisOptions> {
  if (!auth) return {};
  return {
    ...(auth.username !== undefined ? { username: auth.username } : {}),
    ...(auth.password !== undefined ? { password: auth.password } : {}),
    ...(auth.tls ? { tls: {} } : {}),
  };
}

/** Whether `redis` is a cluster client (made from `clusterNodes`). */
export function isCluster(redis: Redis): boolean {
  return (redis as unknown) instanceof Cluster;
}

/**
 * The bullmq prefix to use on `config`'s Redis. Every key of a bullmq queue is touched by its
 * scripts together, so on a cluster they must share one slot: the prefix is wrapped in a hash
 * tag (`{relayplane:bull}`), as bullmq asks. On one server the prefix stays as it was, so the
 * existing schedules and jobs are found where they are.
 */
export function queuePrefix(config: RedisConfig, prefix: string): string {
  return config.clusterNodes && !/\{[^}]+\}/.test(prefix) ? `{${prefix}}` : prefix;
}

/** A new connection like `redis` (same server or cluster) with `options` changed. */
export function duplicateConnection(redis: Redis, options: Partial<RedisOptions>): Redis {
  if (isCluster(redis)) {
    const cluster = redis as unknown as Cluster;
    return traceRedis(cluster.duplicate([], { redisOptions: options }) as unknown as Redis);
  }
  return traceRedis(redis.duplicate(options));
}

/**
 * A cluster client for `nodes`, typed as the `Redis` the services use (see the module comment).
 * Its connections to the nodes are made lazily by ioredis, on a node's first command; they are
 * opened as soon as the node is known instead, so that a node's first commands do not meet a
 * connection still being made (which a client without an offline queue refuses).
 */
function createCluster(
  nodes: readonly RedisNode[],
  options: ClusterOptions,
  logger: Logger,
  name: string,
): Redis {
  const cluster = new Cluster(
    nodes.map((n) => ({ host: n.host, port: n.port })),
    options,
  );
  cluster.on('+node', (node: Redis) => {
    if (node.status === 'wait') node.connect().catch(() => {});
  });
  // One node failing is not an error of the cluster client (its 'error' event stays quiet while
  // other nodes answer): said here, once per node and minute, since the connection to a dead
  // node is made again on every slot refresh.
  const warned = new Map<string, number>();
  cluster.on('node error', (err: Error, node: string) => {
    const now = Date.now();
    if ((warned.get(node) ?? -Infinity) > now - NODE_ERROR_LOG_INTERVAL_MS) return;
    warned.set(node, now);
    logger.warn({ err: { message: err.message }, redis: name, node }, 'redis cluster node error');
  });
  return cluster as unknown as Redis;
}

const NODE_ERROR_LOG_INTERVAL_MS = 60_000;

export function createRedis(config: RedisConfig, logger: Logger, name: string): Redis {
  const connection = {
    connectionName: `relayplane-${name}`,
    // Fail fast rather than queue commands forever while Redis is away.
    maxRetriesPerRequest: 2,
    connectTimeout: 2_000,
  };
  const retry = (attempt: number) => Math.min(attempt * 200, 2_000);
  const redis = config.clusterNodes
    ? createCluster(
        config.clusterNodes,
        {
          redisOptions: { ...connection, ...clusterNodeOptions(config.clusterAuth) },
          enableReadyCheck: true,
          clusterRetryStrategy: retry,
          lazyConnect: false,
        },
        logger,
        name,
      )
    : new Redis(config.url, {
        ...connection,
        enableReadyCheck: true,
        retryStrategy: retry,
        lazyConnect: false,
      });
  let warned = false;
  redis.on('error', (err) => {
    if (!warned) logger.warn({ err: { message: err.message }, redis: name }, 'redis connection error');
    warned = true;
  });
  redis.on('ready', () => {
    warned = false;
  });
  return traceRedis(redis);
}

/**
 * A Redis connection for a request path (slot reservations, login throttling). Unlike the
 * factory above it never queues: while Redis is away a command fails at once
 * (`enableOfflineQueue: false`, no per-request retries), and a command Redis does not answer
 * fails after `commandTimeoutMs`, so callers fail closed or fall back quickly instead of
 * holding the request.
 */
export function createRequestPathRedis(
  config: RedisConfig,
  logger: Logger,
  options: { name: string; commandTimeoutMs: number; enableAutoPipelining?: boolean },
): Redis {
  const connection = {
    connectionName: `relayplane-${options.name}`,
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs,
    // A command timing out leaves the socket as it is: after a failover or a blackhole ioredis
    // kept a connection "ready" on which every command timed out, and never reconnected. A socket
    // that answers nothing this long after a write is dropped and reconnected instead.
    socketTimeout: Math.max(2 * options.commandTimeoutMs, 1_000),
    connectTimeout: Math.max(options.commandTimeoutMs, 1_000),
  };
  const retry = (attempt: number) => Math.min(attempt * 100, 1_000);
  const redis = config.clusterNodes
    ? createCluster(
        config.clusterNodes,
        {
          redisOptions: { ...connection, ...clusterNodeOptions(config.clusterAuth) },
          enableOfflineQueue: false,
          enableAutoPipelining: options.enableAutoPipelining ?? false,
          clusterRetryStrategy: retry,
          // A command meeting a closed connection is tried again after 20 ms, at most 3 times in
          // all (redirections included): a connection to a live master that is being made again
          // (a slot refresh, a reconnect) then serves it, while a master that is down fails its
          // slots' commands within about 60 ms on a refused connection (each try is bounded by
          // the command timeout), instead of ioredis' 16 tries 100 ms apart through other nodes
          // (which answer MOVED back to it). Its tenants get 503 + Retry-After, the other
          // masters' tenants are served as before. CLUSTERDOWN is answered as it comes.
          retryDelayOnFailover: 20,
          maxRedirections: 3,
          retryDelayOnClusterDown: 0,
        },
        logger,
        options.name,
      )
    : new Redis(config.url, {
        ...connection,
        enableOfflineQueue: false,
        enableAutoPipelining: options.enableAutoPipelining ?? false,
        retryStrategy: retry,
      });
  let warned = false;
  redis.on('error', (err: Error) => {
    if (!warned)
      logger.warn({ err: { message: err.message }, redis: options.name }, 'redis connection error');
    warned = true;
  });
  redis.on('ready', () => {
    warned = false;
  });
  return traceRedis(redis);
}

/** Resolves true when `redis` is ready, false after `timeoutMs`: callers go on and fail closed (or fall back) per request. */
export async function waitReady(redis: Redis, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return true;
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    redis.on('ready', onReady);
  });
}

/**
 * `bus` for a service that must start while Redis is away: subscribe() never waits for Redis.
 * Once each of `connections` (the bus's own, just made) has connected or failed once, a
 * subscription made while they are ready is live when subscribe() resolves, as on the bus
 * itself. Otherwise subscribe() resolves at once and the subscription is made in the
 * background, retried until Redis answers (a SUBSCRIBE on a connection that is away fails with
 * `MaxRetriesPerRequestError`, which is what made a service started before Redis exit). Nothing
 * is lost meanwhile that was not lost already: nobody can publish through a Redis that is away,
 * and every consumer also refreshes on a timer because the bus delivers at most once.
 */
export function deferringSubscriptions(bus: Bus, connections: readonly Redis[], logger: Logger): Bus {
  const closing = new AbortController();
  const settled = Promise.all(connections.map(firstOutcome));
  const reachable = () => connections.every((c) => c.status === 'ready');
  return {
    publish: (channel, message) => bus.publish(channel, message),
    async subscribe(channel, handler) {
      await settled;
      if (reachable()) {
        try {
          return await bus.subscribe(channel, handler);
        } catch {
          // Redis went away meanwhile: subscribe in the background, as when it was away.
        }
      }
      const cancelled = new AbortController();
      const signal = AbortSignal.any([closing.signal, cancelled.signal]);
      let unsubscribe: (() => Promise<void>) | undefined;
      retryUntilDone(`subscribing to ${channel}`, () => bus.subscribe(channel, handler), {
        logger,
        signal,
      }).then(
        async (live) => {
          // Unsubscribed (or closed) while the SUBSCRIBE was on its way: undo it.
          if (signal.aborted) await live().catch(() => {});
          else unsubscribe = live;
        },
        () => {}, // only the abort ends the retries
      );
      return async () => {
        cancelled.abort();
        await unsubscribe?.();
      };
    },
    async close() {
      closing.abort();
      await bus.close();
    },
  };
}

/**
 * Resolves when `redis` (just made) is ready or its first connection attempt failed: refused at
 * once, or after `connectTimeout` when nothing answers.
 */
function firstOutcome(redis: Redis): Promise<void> {
  if (redis.status === 'ready' || redis.status === 'reconnecting' || redis.status === 'end') {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const done = () => {
      redis.off('ready', done);
      redis.off('error', done);
      redis.off('end', done);
      resolve();
    };
    redis.on('ready', done);
    redis.on('error', done);
    redis.on('end', done);
  });
}
