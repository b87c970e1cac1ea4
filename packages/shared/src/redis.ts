/** Redis factory: one place that sets connection policy for every service. */
import { Redis } from 'ioredis';
import type { Logger } from './logger.ts';

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
