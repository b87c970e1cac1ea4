/**
 * Fixed-window rate limiting: a hit counter per key that resets when its window ends (the
 * login, sign-up, device-flow and checkout throttles).
 *
 * Two implementations of one port: Redis (shared by every replica; one script call per hit,
 * fixed-window-1.lua) and in-memory (per process, driven by a clock). `FallbackRateLimiter` uses
 * Redis and falls back to memory while Redis fails, so a dead Redis never means "no limit".
 */
import type { Redis } from 'ioredis';
import type { Clock } from './clock.ts';
import type { Logger } from './logger.ts';
import { loadScript } from './redis-scripts.ts';

/** One counted hit: how many hits the key has in its window, and when the window ends. */
export interface WindowHit {
  count: number;
  /** Milliseconds until the window (and so the count) ends; at least 1. */
  resetInMs: number;
}

export interface RateLimiter {
  /** Counts one hit against `key`; the first hit of a window starts it. */
  hit(key: string): Promise<WindowHit>;
  /** Forgets the hits of `key` (e.g. a successful login clears its account). */
  clear(key: string): Promise<void>;
  /** The hits of `key` in its current window, without counting one (0 when none). */
  peek(key: string): Promise<number>;
}

const FIXED_WINDOW = loadScript(new URL('./fixed-window-1.lua', import.meta.url));

export class RedisRateLimiter implements RateLimiter {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #windowMs: number;

  /** `prefix` is prepended to every key (the deployment's Redis prefix plus a namespace). */
  constructor(redis: Redis, prefix: string, windowMs: number) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#windowMs = windowMs;
  }

  async hit(key: string): Promise<WindowHit> {
    const reply = await FIXED_WINDOW.run(this.#redis, [this.#prefix + key], [this.#windowMs]);
    if (!Array.isArray(reply) || reply.length !== 2) throw new Error('unexpected rate limiter reply');
    return { count: Number(reply[0]), resetInMs: Math.max(1, Number(reply[1])) };
  }

  async clear(key: string): Promise<void> {
    await this.#redis.del(this.#prefix + key);
  }

  async peek(key: string): Promise<number> {
    // A key without a TTL is one the script has not finished: its count is still the window's.
    const value = await this.#redis.get(this.#prefix + key);
    return value === null ? 0 : Number(value);
  }
}

export class MemoryRateLimiter implements RateLimiter {
  readonly #clock: Clock;
  readonly #windowMs: number;
  readonly #windows = new Map<string, { count: number; endsAt: number }>();
  #nextSweep = 0;

  constructor(clock: Clock, windowMs: number) {
    this.#clock = clock;
    this.#windowMs = windowMs;
  }

  async hit(key: string): Promise<WindowHit> {
    const now = this.#clock.now().getTime();
    this.#sweep(now);
    let window = this.#windows.get(key);
    if (!window || window.endsAt <= now) {
      window = { count: 0, endsAt: now + this.#windowMs };
      this.#windows.set(key, window);
    }
    window.count += 1;
    return { count: window.count, resetInMs: Math.max(1, window.endsAt - now) };
  }

  async clear(key: string): Promise<void> {
    this.#windows.delete(key);
  }

  async peek(key: string): Promise<number> {
    const window = this.#windows.get(key);
    return window && window.endsAt > this.#clock.now().getTime() ? window.count : 0;
  }

  /** How many keys are held (tests check that expired windows are dropped). */
  get size(): number {
    return this.#windows.size;
  }

  /** Drops expired windows, at most once per window length, so the map cannot grow without bound. */
  #sweep(now: number): void {
    if (now < this.#nextSweep) return;
    this.#nextSweep = now + this.#windowMs;
    for (const [key, window] of this.#windows) if (window.endsAt <= now) this.#windows.delete(key);
  }
}

/**
 * Redis first; on a Redis error the in-memory limiter answers instead (one warning per
 * outage), and Redis is used again as soon as it answers.
 */
export class FallbackRateLimiter implements RateLimiter {
  readonly #primary: RateLimiter;
  readonly #fallback: RateLimiter;
  readonly #logger: Logger;
  readonly #name: string;
  #degraded = false;

  constructor(primary: RateLimiter, fallback: RateLimiter, logger: Logger, name: string) {
    this.#primary = primary;
    this.#fallback = fallback;
    this.#logger = logger;
    this.#name = name;
  }

  /** True while the in-memory limiter is answering. */
  get degraded(): boolean {
    return this.#degraded;
  }

  async hit(key: string): Promise<WindowHit> {
    try {
      const hit = await this.#primary.hit(key);
      this.#recovered();
      return hit;
    } catch (err) {
      this.#failed(err);
      return this.#fallback.hit(key);
    }
  }

  async clear(key: string): Promise<void> {
    await this.#fallback.clear(key);
    try {
      await this.#primary.clear(key);
      this.#recovered();
    } catch (err) {
      this.#failed(err);
    }
  }

  async peek(key: string): Promise<number> {
    try {
      const count = await this.#primary.peek(key);
      this.#recovered();
      return count;
    } catch (err) {
      this.#failed(err);
      return this.#fallback.peek(key);
    }
  }

  #failed(err: unknown): void {
    if (this.#degraded) return;
    this.#degraded = true;
    const message = err instanceof Error ? err.message : String(err);
    this.#logger.warn({ err: { message } }, `${this.#name} falling back to in-memory limits`);
  }

  #recovered(): void {
    if (!this.#degraded) return;
    this.#degraded = false;
    this.#logger.info(`${this.#name} back on redis`);
  }
}

/**
 * The limiter a service throttles with: with Redis, counted in Redis (shared by every replica)
 * and in per-process memory while Redis fails, never "no limit"; without Redis, memory alone.
 * `prefix` is prepended to every key (the deployment's prefix plus a namespace); `name` is how
 * the fallback's warnings call it (e.g. "login throttle").
 */
export function createRateLimiter(
  redis: { connection: Redis; prefix: string } | undefined,
  windowMs: number,
  clock: Clock,
  logger: Logger,
  name: string,
): RateLimiter {
  const memory = new MemoryRateLimiter(clock, windowMs);
  if (!redis) return memory;
  return new FallbackRateLimiter(
    new RedisRateLimiter(redis.connection, redis.prefix, windowMs),
    memory,
    logger,
    name,
  );
}
