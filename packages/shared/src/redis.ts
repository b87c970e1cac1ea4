/** Redis factory: one place that sets connection policy for every service. */
import { Redis } from 'ioredis';
import type { Bus } from './bus.ts';
import type { Logger } from './logger.ts';
import { retryUntilDone } from './readiness.ts';

export interface RedisConfig {
  url: string;
  /** Prefix for every key and channel this process uses (tests isolate with it). */
  prefix: string;
}

export function createRedis(config: RedisConfig, logger: Logger, name: string): Redis {
  const redis = new Redis(config.url, {
    connectionName: `relayplane-${name}`,
    // Fail fast rather than queue commands forever while Redis is away.
    maxRetriesPerRequest: 2,
    connectTimeout: 2_000,
    enableReadyCheck: true,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
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
  return redis;
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
  const redis = new Redis(config.url, {
    connectionName: `relayplane-${options.name}`,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs,
    // A command timing out leaves the socket as it is: after a failover or a blackhole ioredis
    // kept a connection "ready" on which every command timed out, and never reconnected. A socket
    // that answers nothing this long after a write is dropped and reconnected instead.
    socketTimeout: Math.max(2 * options.commandTimeoutMs, 1_000),
    connectTimeout: Math.max(options.commandTimeoutMs, 1_000),
    enableAutoPipelining: options.enableAutoPipelining ?? false,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
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
  return redis;
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
