import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/keys.ts';

/**
 * A fast mirror of revocations in Redis: `revoked:{jti}` = 1 until the credential expires.
 * Postgres stays the truth: a miss or an error here is settled by Postgres, never taken as
 * "not revoked" on its own.
 */
export class RedisRevocationMarks {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;

  constructor(redis: Redis, keys: RedisKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  /** Marks `jti` revoked until `expiresAtMs` (epoch ms; an instant already past stores nothing). */
  async mark(jti: string, expiresAtMs: number): Promise<void> {
    await this.#redis.set(this.#keys.revoked(jti), '1', 'PXAT', Math.ceil(expiresAtMs));
  }

  async isMarked(jti: string): Promise<boolean> {
    return (await this.#redis.exists(this.#keys.revoked(jti))) === 1;
  }
}
