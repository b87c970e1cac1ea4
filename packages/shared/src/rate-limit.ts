/**
 * Rate limiting, one import for every service (`@relayplane/shared/rate-limit`):
 *
 * - fixed windows (rate-limit-fixed-window.ts): a hit counter per key, one Redis script call per
 *   hit, for the throttles (login, sign-up, device flow, checkout);
 * - leased windows (below, with the stores in rate-limit-leases.ts): a per-key limit counted in
 *   Redis across replicas without a round trip per request, for the gateway's
 *   max_issuance_per_second_per_key.
 *
 * Both count in Redis and in per-process memory while Redis fails (never "no limit"), and in
 * memory alone without Redis. Why these and not rate-limiter-flexible: docs/performance.md,
 * "The per-key issuance rate" (measured by tests/bench/rate-limit.ts).
 */
import type { Redis } from 'ioredis';
import type { Logger } from './logger.ts';
import {
  FallbackLeaseStore,
  type LeaseStore,
  MemoryLeaseStore,
  RedisLeaseStore,
  type RefusedReport,
} from './rate-limit-leases.ts';

export {
  createRateLimiter,
  FallbackRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  RedisRateLimiter,
  type WindowHit,
} from './rate-limit-fixed-window.ts';
export {
  FallbackLeaseStore,
  type Lease,
  type LeaseStore,
  MemoryLeaseStore,
  RedisLeaseStore,
  type RefusedReport,
} from './rate-limit-leases.ts';

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
