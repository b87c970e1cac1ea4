import type { Logger } from '@relayplane/shared/logger';
import type { RedisConfig } from '@relayplane/shared/redis';
import { Redis } from 'ioredis';

/**
 * The login throttle's own Redis connection (request path). It never queues: while Redis
 * is away a command fails at once (`enableOfflineQueue: false`, no per-request retries), and
 * a command Redis does not answer fails after `commandTimeoutMs`, so login falls back to
 * the in-memory limits quickly instead of holding the caller.
 */
export function createThrottleRedis(config: RedisConfig, logger: Logger, commandTimeoutMs = 500): Redis {
  const redis = new Redis(config.url, {
    connectionName: 'relayplane-admin-throttle',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: Math.max(commandTimeoutMs, 1_000),
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
  });
  let warned = false;
  redis.on('error', (err: Error) => {
    if (!warned)
      logger.warn({ err: { message: err.message }, redis: 'admin-throttle' }, 'redis connection error');
    warned = true;
  });
  redis.on('ready', () => {
    warned = false;
  });
  return redis;
}

/** Resolves when `redis` is ready, or after `timeoutMs` (false): login then uses the in-memory limits until it is. */
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
