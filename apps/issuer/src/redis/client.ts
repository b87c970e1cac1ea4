import type { Logger } from '@relayplane/shared/logger';
import type { RedisConfig } from '@relayplane/shared/redis';
import { Redis } from 'ioredis';

/**
 * A Redis connection for the request path (slot reservations, revocation markers).
 *
 * Unlike the bus/scheduler connection it never queues: while Redis is away a command fails
 * at once (`enableOfflineQueue: false`, no per-request retries), and a command Redis does
 * not answer fails after `commandTimeoutMs`. Issuance then answers `unavailable` quickly
 * instead of holding the caller.
 */
export function createRequestPathRedis(
  config: RedisConfig,
  logger: Logger,
  options: { name: string; commandTimeoutMs: number },
): Redis {
  const redis = new Redis(config.url, {
    connectionName: `relayplane-${options.name}`,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: Math.max(options.commandTimeoutMs, 1_000),
    enableAutoPipelining: true,
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

/** Resolves when `redis` is ready, or after `timeoutMs` (false): callers keep going and fail closed per request. */
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
