/**
 * The shared count of a leased limit (rate-limit.ts, LeasedRateLimiter): a port with its Redis
 * store (one script call per lease, lease-1.lua, on Redis's clock), its in-memory twin (the
 * fallback while Redis fails, and the embedded mode) and the fallback between them.
 */
import type { Redis } from 'ioredis';
import type { Logger } from './logger.ts';
import { loadScript } from './redis-scripts.ts';

/** What a lease store answers: tokens of `key`'s current window granted to the caller. */
export interface Lease {
  /** Tokens granted (0 ≤ granted ≤ want): each admits one attempt until the window ends. */
  granted: number;
  /** The window's index: the store's time in ms divided by the window length. */
  window: number;
  /** Milliseconds until that window ends, on the store's clock; at least 1. */
  resetInMs: number;
}

/** Attempts refused locally in `window`, to be added to the shared count. */
export interface RefusedReport {
  window: number;
  count: number;
}

/**
 * The shared count of a leased limit. `take` adds `refused` (if its window is the current or
 * the previous one), then grants up to `want` tokens while the current window's count (tokens
 * granted plus attempts refused) is below `limit`, and counts what it granted.
 */
export interface LeaseStore {
  take(key: string, limit: number, want: number, refused: RefusedReport | undefined): Promise<Lease>;
}

const LEASE = loadScript(new URL('./lease-1.lua', import.meta.url));

/**
 * One hash per key: `w` the window, `n` its count (granted tokens + reported refusals), `p` the
 * previous window's final count (late refusal reports land there); see lease-1.lua. The window
 * comes from Redis's clock (TIME), so every replica agrees on it whatever its own clock says.
 */
export class RedisLeaseStore implements LeaseStore {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #windowMs: number;

  /** `prefix` is prepended to every key (the deployment's Redis prefix plus a namespace). */
  constructor(redis: Redis, prefix: string, windowMs: number) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#windowMs = windowMs;
  }

  async take(key: string, limit: number, want: number, refused: RefusedReport | undefined): Promise<Lease> {
    const args = [this.#windowMs, limit, want, refused?.window ?? -1, refused?.count ?? 0];
    const reply = await LEASE.run(this.#redis, [this.#prefix + key], args);
    if (!Array.isArray(reply) || reply.length !== 4) throw new Error('unexpected lease reply');
    return {
      granted: Number(reply[0]),
      window: Number(reply[1]),
      resetInMs: Math.max(1, Number(reply[2])),
    };
  }
}

/** The same windows on this process's clock: the fallback while Redis fails, and the embedded mode. */
export class MemoryLeaseStore implements LeaseStore {
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #counts = new Map<string, { window: number; count: number }>();
  #nextSweep = 0;

  constructor(windowMs: number, now: () => number = Date.now) {
    this.#windowMs = windowMs;
    this.#now = now;
  }

  async take(key: string, limit: number, want: number, refused: RefusedReport | undefined): Promise<Lease> {
    const now = this.#now();
    const window = Math.floor(now / this.#windowMs);
    if (now >= this.#nextSweep) {
      this.#nextSweep = now + this.#windowMs;
      for (const [k, c] of this.#counts) if (c.window < window) this.#counts.delete(k);
    }
    let entry = this.#counts.get(key);
    if (!entry || entry.window !== window) {
      entry = { window, count: 0 };
      this.#counts.set(key, entry);
    }
    if (refused && refused.window === window) entry.count += refused.count;
    const granted = want > 0 && entry.count < limit ? Math.min(want, limit - entry.count) : 0;
    entry.count += granted;
    return { granted, window, resetInMs: Math.max(1, this.#windowMs - (now % this.#windowMs)) };
  }

  /** Keys held (tests check that past windows are dropped). */
  get size(): number {
    return this.#counts.size;
  }
}

/** Redis first; while it fails, the in-memory store (one warning per outage), as FallbackRateLimiter. */
export class FallbackLeaseStore implements LeaseStore {
  readonly #primary: LeaseStore;
  readonly #fallback: LeaseStore;
  readonly #logger: Logger;
  readonly #name: string;
  #degraded = false;

  constructor(primary: LeaseStore, fallback: LeaseStore, logger: Logger, name: string) {
    this.#primary = primary;
    this.#fallback = fallback;
    this.#logger = logger;
    this.#name = name;
  }

  get degraded(): boolean {
    return this.#degraded;
  }

  async take(key: string, limit: number, want: number, refused: RefusedReport | undefined): Promise<Lease> {
    try {
      const lease = await this.#primary.take(key, limit, want, refused);
      if (this.#degraded) {
        this.#degraded = false;
        this.#logger.info(`${this.#name} back on redis`);
      }
      return lease;
    } catch (err) {
      if (!this.#degraded) {
        this.#degraded = true;
        const message = err instanceof Error ? err.message : String(err);
        this.#logger.warn({ err: { message } }, `${this.#name} falling back to in-memory limits`);
      }
      return this.#fallback.take(key, limit, want, refused);
    }
  }
}
