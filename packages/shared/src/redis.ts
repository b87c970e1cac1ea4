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
