/**
 * The login and device-flow throttles: fixed-window hit counters on the shared rate limiter
 * (`@relayplane/shared/rate-limit`). With Redis they are shared by every replica and fall back
 * to per-process memory while Redis fails, never to "no limit"; without Redis, memory alone.
 * Keys come from ../redis/keys.ts.
 */
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import {
  FallbackRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  RedisRateLimiter,
} from '@relayplane/shared/rate-limit';
import type { Redis } from 'ioredis';

export interface ThrottleRedis {
  connection: Redis;
  /** The deployment's key prefix. */
  prefix: string;
}

/** `name` is how the fallback's warnings call it (e.g. "login throttle"). */
export function createThrottle(
  redis: ThrottleRedis | undefined,
  windowSeconds: number,
  clock: Clock,
  logger: Logger,
  name: string,
): RateLimiter {
  const windowMs = windowSeconds * 1000;
  const memory = new MemoryRateLimiter(clock, windowMs);
  if (!redis) return memory;
  const primary = new RedisRateLimiter(redis.connection, redis.prefix, windowMs);
  return new FallbackRateLimiter(primary, memory, logger, name);
}
