import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/keys.ts';
import type { SlotReservation, SlotStore } from './slot-store.ts';

const RESERVE_SLOT_LUA = readFileSync(new URL('../redis/reserve-slot.lua', import.meta.url), 'utf8');

interface WithReserveSlot {
  /** EVALSHA of reserve-slot.lua (EVAL once when Redis does not know the script yet). */
  reserveSlot(key: string, jti: string, ttlMs: number, cap: number): Promise<[number, number]>;
}

/** Slots in one ZSET per tenant, reserved by one atomic Lua script using Redis server time. */
export class RedisSlotStore implements SlotStore {
  readonly #redis: Redis & WithReserveSlot;
  readonly #keys: RedisKeys;
  readonly #ownsConnection: boolean;

  constructor(redis: Redis, keys: RedisKeys, options: { ownsConnection?: boolean } = {}) {
    redis.defineCommand('reserveSlot', { numberOfKeys: 1, lua: RESERVE_SLOT_LUA });
    this.#redis = redis as Redis & WithReserveSlot;
    this.#keys = keys;
    this.#ownsConnection = options.ownsConnection ?? false;
  }

  async reserve(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation> {
    const [granted, inUse] = await this.#redis.reserveSlot(
      this.#keys.slots(tenantId),
      jti,
      Math.ceil(ttlMs),
      Math.max(0, Math.floor(cap)),
    );
    return { granted: granted === 1, inUse };
  }

  async release(tenantId: string, jti: string): Promise<void> {
    await this.#redis.zrem(this.#keys.slots(tenantId), jti);
  }

  async leases(tenantId: string): Promise<string[]> {
    const key = this.#keys.slots(tenantId);
    // Same notion of "now" as the script: the Redis server's clock.
    const [seconds, micros] = await this.#redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    return (await this.#redis.zrangebyscore(key, `(${now}`, '+inf')).sort();
  }

  async close(): Promise<void> {
    if (this.#ownsConnection) this.#redis.disconnect();
  }
}
