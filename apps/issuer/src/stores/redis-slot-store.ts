import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/keys.ts';
import type { SlotReservation, SlotStore } from './slot-store.ts';

const RESERVE_SLOTS_LUA = readFileSync(new URL('./reserve-slots.lua', import.meta.url), 'utf8');

interface WithReserveSlots {
  /**
   * EVALSHA of reserve-slots.lua (EVAL once when Redis does not know the script yet):
   * `args` = cap, then jti and lifetime in ms of each lease. Answers granted and in-use per lease.
   */
  reserveSlots(key: string, ...args: (string | number)[]): Promise<number[]>;
}

/** At most this many leases go in one script call (its run time blocks Redis). */
const MAX_SLOT_BATCH = 256;
/** Script calls in flight at once per tenant; leases asked meanwhile wait and go together. */
const MAX_SLOT_CALLS_PER_TENANT = 1;

interface Pending {
  jti: string;
  ttlMs: number;
  resolve: (r: SlotReservation) => void;
  reject: (err: unknown) => void;
}

interface TenantQueue {
  pending: Pending[];
  cap: number;
  running: number;
  scheduled: boolean;
}

/**
 * Slots in one ZSET per tenant, reserved by one atomic Lua script using Redis server time.
 *
 * Reservations of a tenant asked in the same turn of the event loop, or while its previous
 * script call runs, go to Redis together in one call: one round trip and one script run for the
 * batch instead of one each. The script decides them in order, exactly as separate calls would
 * (the cap holds within a batch), and each caller learns its own outcome. If the call fails,
 * every reservation in it fails (and the callers release what the script may have taken).
 */
export class RedisSlotStore implements SlotStore {
  readonly #redis: Redis & WithReserveSlots;
  readonly #keys: RedisKeys;
  readonly #ownsConnection: boolean;
  readonly #tenants = new Map<string, TenantQueue>();
  /** Script calls made so far (tests read it to see batching happen). */
  calls = 0;

  constructor(redis: Redis, keys: RedisKeys, options: { ownsConnection?: boolean } = {}) {
    redis.defineCommand('reserveSlots', { numberOfKeys: 1, lua: RESERVE_SLOTS_LUA });
    this.#redis = redis as Redis & WithReserveSlots;
    this.#keys = keys;
    this.#ownsConnection = options.ownsConnection ?? false;
  }

  reserve(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation> {
    let queue = this.#tenants.get(tenantId);
    if (!queue) {
      queue = { pending: [], cap, running: 0, scheduled: false };
      this.#tenants.set(tenantId, queue);
    }
    // The cap as the latest caller knows it (a plan change reaches every request soon after).
    queue.cap = Math.max(0, Math.floor(cap));
    const done = new Promise<SlotReservation>((resolve, reject) =>
      queue.pending.push({ jti, ttlMs: Math.ceil(ttlMs), resolve, reject }),
    );
    if (!queue.scheduled && queue.running < MAX_SLOT_CALLS_PER_TENANT) {
      queue.scheduled = true;
      // A microtask, not a timer: reservations asked in the same turn share a call.
      queueMicrotask(() => {
        queue.scheduled = false;
        this.#start(tenantId, queue);
      });
    }
    return done;
  }

  #start(tenantId: string, queue: TenantQueue): void {
    while (queue.pending.length > 0 && queue.running < MAX_SLOT_CALLS_PER_TENANT) {
      const batch = queue.pending.splice(0, MAX_SLOT_BATCH);
      queue.running++;
      void this.#call(tenantId, queue.cap, batch).finally(() => {
        queue.running--;
        if (queue.pending.length > 0) this.#start(tenantId, queue);
        else if (queue.running === 0 && !queue.scheduled) this.#tenants.delete(tenantId);
      });
    }
  }

  async #call(tenantId: string, cap: number, batch: Pending[]): Promise<void> {
    const args: (string | number)[] = [cap];
    for (const p of batch) args.push(p.jti, p.ttlMs);
    this.calls++;
    try {
      const out = await this.#redis.reserveSlots(this.#keys.slots(tenantId), ...args);
      batch.forEach((p, i) => {
        const granted = out[2 * i];
        const inUse = out[2 * i + 1];
        if (granted === undefined || inUse === undefined)
          p.reject(new Error('short answer from reserve-slots'));
        else p.resolve({ granted: granted === 1, inUse });
      });
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
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
