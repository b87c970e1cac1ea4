/**
 * Fixed-window rate limiting: a hit counter per key that resets when its window ends.
 *
 * Two implementations of one port: Redis (shared by every replica) and in-memory (per
 * process, driven by a clock). `FallbackRateLimiter` uses Redis and falls back to memory
 * while Redis fails, so a dead Redis never means "no limit".
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Clock } from './clock.ts';
import type { Logger } from './logger.ts';

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

/** INCR; PEXPIRE on the window's first hit (or when a key somehow lost its TTL); answers {count, PTTL}. */
export const FIXED_WINDOW_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {count, tonumber(ARGV[1])}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

const SCRIPT_SHA = createHash('sha1').update(FIXED_WINDOW_SCRIPT).digest('hex');

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
    const full = this.#prefix + key;
    let reply: unknown;
    try {
      reply = await this.#redis.evalsha(SCRIPT_SHA, 1, full, this.#windowMs);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      reply = await this.#redis.eval(FIXED_WINDOW_SCRIPT, 1, full, this.#windowMs);
    }
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

// ---------------------------------------------------------------------------------------------
// Leased windows: a limit counted in Redis across replicas without a round trip per request.
// ---------------------------------------------------------------------------------------------

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

/**
 * One hash per key: `w` the window, `n` its count (granted tokens + reported refusals), `p` the
 * previous window's final count (late refusal reports land there). The window comes from Redis's
 * clock (TIME), so every replica agrees on it whatever its own clock says.
 * KEYS[1] the key; ARGV: windowMs, limit, want, refused window, refused count.
 * Answers {granted, window, ms left in the window, count}.
 */
export const LEASE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local windowMs = tonumber(ARGV[1])
local window = math.floor(now / windowMs)
local left = windowMs - (now % windowMs)
local v = redis.call('HMGET', KEYS[1], 'w', 'n', 'p')
local w = tonumber(v[1]) or -1
local n, p = 0, 0
if w == window then
  n = tonumber(v[2]) or 0
  p = tonumber(v[3]) or 0
elseif w == window - 1 then
  p = tonumber(v[2]) or 0
end
local rc = tonumber(ARGV[5])
if rc > 0 then
  local rw = tonumber(ARGV[4])
  if rw == window then n = n + rc elseif rw == window - 1 then p = p + rc end
end
local limit = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local granted = 0
if want > 0 and n < limit then granted = math.min(want, limit - n) end
n = n + granted
redis.call('HSET', KEYS[1], 'w', window, 'n', n, 'p', p)
redis.call('PEXPIRE', KEYS[1], 2 * windowMs)
return {granted, window, left, n}
`;

const LEASE_SCRIPT_SHA = createHash('sha1').update(LEASE_SCRIPT).digest('hex');

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
    const full = this.#prefix + key;
    let reply: unknown;
    try {
      reply = await this.#redis.evalsha(LEASE_SCRIPT_SHA, 1, full, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      reply = await this.#redis.eval(LEASE_SCRIPT, 1, full, ...args);
    }
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

/** The answer for an attempt over the limit: when the window ends. */
export interface Refusal {
  retryAfterMs: number;
}

export interface LeasedRateLimiterOptions {
  windowMs: number;
  /** A lease asks for this share of the limit (at least 1 token). Default 0.1. */
  leaseShare?: number;
  /** How often refusals counted locally are added to the store. Default 100 ms. */
  reportEveryMs?: number;
  now?: () => number;
}

interface KeyState {
  limit: number;
  /** The window of the current lease (the store's index). */
  window: number;
  /** This process's time at which the lease stops admitting: the send time + the store's ms left. */
  endsAt: number;
  tokens: number;
  /** The store granted less than asked: the window's limit is reached. */
  exhausted: boolean;
  /** Tokens the next take asks for (at least as many as attempts wait). */
  leaseSize: number;
  /** Attempts refused here in `refusedWindow`, not yet added to the store. */
  refused: number;
  refusedWindow: number;
  /** Attempts waiting for the store's answer; undefined while no take is in flight. */
  waiting: ((result: Refusal | undefined) => void)[] | undefined;
}

/**
 * A per-key limit per window, counted in a shared store (Redis) without a round trip per
 * attempt. A process takes a lease — a share of the key's window budget, counted in the store
 * at once — and admits from it locally; when the lease is spent it takes another, and once the
 * store grants less than asked the window is exhausted: every further attempt until the
 * window's end is refused locally and counted, and the refusals are added to the store's count
 * every `reportEveryMs` (refused attempts count too). Concurrent attempts of one key wait for
 * one take.
 *
 * The lease size follows the key's demand on this process: 1 token at first, doubled after each
 * lease spent within its window, up to ⌈limit × leaseShare⌉, halved after one left unspent.
 *
 * Accuracy: admissions per window never exceed the limit (every token is counted before it
 * admits, and a lease ends no later than its window: its end is computed from the time the take
 * was sent). A lease left unspent when the window ends is lost, so with R processes admitting
 * one key, at most R × (⌈limit × leaseShare⌉ − 1) tokens of a window go unused (in practice
 * far fewer: a lease that is not spent halves).
 */
export class LeasedRateLimiter {
  readonly #store: LeaseStore;
  readonly #windowMs: number;
  readonly #share: number;
  readonly #now: () => number;
  readonly #states = new Map<string, KeyState>();
  readonly #toReport = new Set<string>();
  readonly #timer: NodeJS.Timeout;
  #nextSweep = 0;

  constructor(store: LeaseStore, options: LeasedRateLimiterOptions) {
    this.#store = store;
    this.#windowMs = options.windowMs;
    this.#share = options.leaseShare ?? 0.1;
    this.#now = options.now ?? Date.now;
    this.#timer = setInterval(() => this.#report(), options.reportEveryMs ?? 100);
    this.#timer.unref();
  }

  /**
   * Admits one attempt of `key` (undefined) or refuses it (how long until the window ends).
   * Answers synchronously while the local lease decides; a Promise when the store is asked.
   */
  admit(key: string, limit: number): Refusal | undefined | Promise<Refusal | undefined> {
    const now = this.#now();
    let s = this.#states.get(key);
    if (s && now < s.endsAt) {
      s.limit = limit;
      if (s.tokens > 0) {
        s.tokens--;
        return undefined;
      }
      if (s.exhausted) return this.#refuse(key, s, now);
    }
    if (now >= this.#nextSweep) this.#sweep(now);
    if (!s) {
      s = {
        limit,
        window: -1,
        endsAt: 0,
        tokens: 0,
        exhausted: false,
        leaseSize: 1,
        refused: 0,
        refusedWindow: -1,
        waiting: undefined,
      };
      this.#states.set(key, s);
    }
    s.limit = limit;
    const state = s;
    return new Promise((resolve) => {
      if (state.waiting) {
        state.waiting.push(resolve);
        return;
      }
      state.waiting = [resolve];
      this.#take(key, state);
    });
  }

  /** Keys held (tests check that idle keys are dropped). */
  get size(): number {
    return this.#states.size;
  }

  /** Stops the report timer after adding the refusals counted so far to the store. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#report();
  }

  #refuse(key: string, s: KeyState, now: number): Refusal {
    // Refusals of an earlier window never wait here: the take that moved to this window carried them.
    s.refusedWindow = s.window;
    s.refused++;
    this.#toReport.add(key);
    return { retryAfterMs: Math.max(1, s.endsAt - now) };
  }

  #take(key: string, s: KeyState): void {
    const sentAt = this.#now();
    // The lease follows the key's demand here: it doubles each time one was spent within its
    // window, up to the share of the limit, and halves when one was left unspent at the end of
    // its window. A key seldom used here takes one token at a time and wastes none.
    const largest = Math.max(1, Math.ceil(s.limit * this.#share));
    if (s.tokens > 0 && sentAt >= s.endsAt) s.leaseSize = Math.max(1, Math.floor(s.leaseSize / 2));
    else if (s.window >= 0 && s.tokens === 0) s.leaseSize = Math.min(largest, s.leaseSize * 2);
    s.leaseSize = Math.min(s.leaseSize, largest);
    const want = Math.max(s.leaseSize, s.waiting?.length ?? 1);
    const report = this.#takeReport(key, s);
    this.#store.take(key, s.limit, want, report).then(
      (lease) => {
        s.window = lease.window;
        s.endsAt = sentAt + lease.resetInMs;
        s.tokens = lease.granted;
        s.exhausted = lease.granted < want;
        const queue = s.waiting ?? [];
        let served = 0;
        while (served < queue.length && s.tokens > 0) {
          s.tokens--;
          queue[served++]?.(undefined);
        }
        if (served === queue.length) {
          s.waiting = undefined;
          return;
        }
        s.waiting = queue.slice(served);
        if (!s.exhausted) {
          this.#take(key, s);
          return;
        }
        const rest = s.waiting;
        s.waiting = undefined;
        const now = this.#now();
        for (const resolve of rest) resolve(this.#refuse(key, s, now));
      },
      () => {
        // Only a store without a fallback fails: the attempts fail open (never unlimited for
        // long: the next attempt asks again).
        const queue = s.waiting ?? [];
        s.waiting = undefined;
        for (const resolve of queue) resolve(undefined);
      },
    );
  }

  #takeReport(key: string, s: KeyState): RefusedReport | undefined {
    this.#toReport.delete(key);
    if (s.refused === 0) return undefined;
    const report = { window: s.refusedWindow, count: s.refused };
    s.refused = 0;
    return report;
  }

  /** Adds the refusals counted here to the store (keys with a take in flight report with their next one). */
  async #report(): Promise<void> {
    const calls: Promise<unknown>[] = [];
    for (const key of this.#toReport) {
      const s = this.#states.get(key);
      if (!s || s.waiting) continue;
      const report = this.#takeReport(key, s);
      if (report) calls.push(this.#store.take(key, s.limit, 0, report).catch(() => undefined));
    }
    await Promise.all(calls);
  }

  /** Drops keys idle for a whole window (nothing in flight, nothing to report). */
  #sweep(now: number): void {
    this.#nextSweep = now + this.#windowMs;
    for (const [key, s] of this.#states) {
      if (s.endsAt + this.#windowMs < now && !s.waiting && s.refused === 0) this.#states.delete(key);
    }
  }
}

/**
 * The leased limiter a service enforces a per-key rate with: counted in Redis (shared by every
 * replica) and in per-process memory while Redis fails, never "no limit"; without Redis,
 * memory alone. `prefix` is prepended to every key; `name` is how the fallback's warnings call it.
 */
export function createLeasedRateLimiter(
  redis: { connection: Redis; prefix: string } | undefined,
  options: LeasedRateLimiterOptions,
  logger: Logger,
  name: string,
): LeasedRateLimiter {
  const memory = new MemoryLeaseStore(options.windowMs, options.now);
  const store = redis
    ? new FallbackLeaseStore(
        new RedisLeaseStore(redis.connection, redis.prefix, options.windowMs),
        memory,
        logger,
        name,
      )
    : memory;
  return new LeasedRateLimiter(store, options);
}
