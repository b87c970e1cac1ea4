/**
 * The leased per-key limit (the gateway's max_issuance_per_second_per_key) against the test
 * Redis: two limiters with their own connections stand for two gateways sharing one count.
 *
 * What is asserted per window needs the whole measurement inside one window of Redis's clock.
 * A measurement starts 50 ms into a window, but a loaded machine can stall for seconds at any
 * point: `inOneWindow` reads which window every take (and Redis's TIME before and after) landed
 * in, and measures again with fresh keys when the measurement ran across a window's end. The
 * limiters' own clock is held meanwhile, so no lease ends early on this side either; only
 * Redis's window (and what the store answers) decides.
 */
import {
  createLeasedRateLimiter,
  FallbackLeaseStore,
  type Lease,
  LeasedRateLimiter,
  type LeaseStore,
  MemoryLeaseStore,
  RedisLeaseStore,
  type Refusal,
  type RefusedReport,
} from '@relayplane/shared/rate-limit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { createTestRedis } from '../../src/storage.ts';
import { waitFor } from './conformance/wait.ts';

const testRedis = createTestRedis('leased');
/** Long enough that a test's burst fits in one window once aligned to its start. */
const WINDOW_MS = 2_000;
/** Measurements made again because they ran across a window's end, before giving up. */
const ATTEMPTS = 5;

/** Counts the store's calls (round trips) a limiter makes, and the windows they landed in. */
class Counting implements LeaseStore {
  calls = 0;
  /** The window of every take answered so far. */
  readonly windows: number[] = [];
  /** Refused attempts added to the store by the takes answered so far. */
  reported = 0;
  readonly #inner: LeaseStore;
  constructor(inner: LeaseStore) {
    this.#inner = inner;
  }
  async take(key: string, limit: number, want: number, refused: RefusedReport | undefined): Promise<Lease> {
    this.calls++;
    const lease = await this.#inner.take(key, limit, want, refused);
    this.windows.push(lease.window);
    this.reported += refused?.count ?? 0;
    return lease;
  }
}

/** A limiter's own clock, moved by the test only. */
class HeldClock {
  ms = Date.now();
  readonly now = () => this.ms;
}

const connections: Redis[] = [];
const limiters: LeasedRateLimiter[] = [];
let redis: Redis;

function connection(): Redis {
  const c = new Redis(testRedis.url);
  connections.push(c);
  return c;
}

async function admit(limiter: LeasedRateLimiter, key: string, limit: number): Promise<Refusal | undefined> {
  return await limiter.admit(key, limit);
}

async function redisMs(): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

const windowOf = (ms: number) => Math.floor(ms / WINDOW_MS);

/** Waits until Redis's clock is 50 ms into a window, so a short burst stays in one window. */
async function windowStart(): Promise<void> {
  const now = await redisMs();
  const wait = WINDOW_MS - (now % WINDOW_MS) + 50;
  await new Promise((resolve) => setTimeout(resolve, wait));
}

/** Waits until Redis's clock has left `window`. */
async function windowEnded(window: number): Promise<void> {
  for (let now = await redisMs(); windowOf(now) <= window; now = await redisMs()) {
    await new Promise((resolve) => setTimeout(resolve, (window + 1) * WINDOW_MS - now + 1));
  }
}

let prefixes = 0;
const freshPrefix = () => `${testRedis.prefix}rate${++prefixes}:`;

/** What one measurement works with: keys of its own, limiters on a held clock, counted stores. */
interface Attempt {
  prefix: string;
  clock: HeldClock;
  /** A "gateway": its own connection and limiter on the attempt's keys and clock. */
  gateway(options?: { reportEveryMs?: number }): { store: Counting; limiter: LeasedRateLimiter };
  /** The Redis store alone, on the attempt's keys. */
  store(): Counting;
}

/**
 * Runs `measure` until it ran within one window of Redis's clock: every take it made, and
 * Redis's TIME before and after it, in the same window. Answers what the measurement returned
 * and that window. Assert on the result afterwards, not inside `measure`.
 */
async function inOneWindow<T>(
  measure: (attempt: Attempt) => Promise<T>,
): Promise<{ result: T; window: number }> {
  const seen: number[][] = [];
  for (let i = 0; i < ATTEMPTS; i++) {
    const prefix = freshPrefix();
    const clock = new HeldClock();
    const stores: Counting[] = [];
    const attempt: Attempt = {
      prefix,
      clock,
      gateway(options = {}) {
        const store = attempt.store();
        const limiter = new LeasedRateLimiter(store, { windowMs: WINDOW_MS, now: clock.now, ...options });
        limiters.push(limiter);
        return { store, limiter };
      },
      store() {
        const store = new Counting(new RedisLeaseStore(connection(), prefix, WINDOW_MS));
        stores.push(store);
        return store;
      },
    };
    await windowStart();
    const start = windowOf(await redisMs());
    clock.ms = Date.now();
    const result = await measure(attempt);
    const end = windowOf(await redisMs());
    const windows = [start, ...stores.flatMap((s) => s.windows), end];
    if (windows.every((w) => w === start)) return { result, window: start };
    seen.push([...new Set(windows)]);
  }
  throw new Error(
    `every measurement ran across the end of a ${WINDOW_MS} ms window (windows seen per attempt: ${JSON.stringify(seen)})`,
  );
}

beforeAll(() => {
  redis = connection();
});

afterAll(async () => {
  for (const l of limiters) await l.close();
  for (const c of connections) c.disconnect();
  await testRedis.clean();
});

describe('LeasedRateLimiter on Redis', () => {
  it('admits exactly the limit per window across two gateways, refuses the rest with the time left, and keeps other keys apart', async () => {
    const { result } = await inOneWindow(async ({ gateway }) => {
      const a = gateway();
      const b = gateway();
      const burst = await Promise.all(
        Array.from({ length: 120 }, (_, i) => admit((i % 2 ? a : b).limiter, 'key-1', 50)),
      );
      return {
        burst,
        // Both gateways once more: neither may admit past the shared count.
        again: [await admit(a.limiter, 'key-1', 50), await admit(b.limiter, 'key-1', 50)],
        // Another key of the same tenant has its own count.
        otherKey: [await admit(a.limiter, 'key-2', 50), await admit(b.limiter, 'key-2', 50)],
      };
    });
    const admitted = result.burst.filter((r) => r === undefined).length;
    const refusals = result.burst.filter((r): r is Refusal => r !== undefined);
    expect(admitted).toBe(50);
    expect(refusals).toHaveLength(70);
    for (const r of refusals) {
      expect(r.retryAfterMs).toBeGreaterThan(0);
      expect(r.retryAfterMs).toBeLessThanOrEqual(WINDOW_MS);
    }
    expect(result.again[0]).toBeDefined();
    expect(result.again[1]).toBeDefined();
    expect(result.otherKey).toEqual([undefined, undefined]);
  });

  it('counts refused attempts in Redis too (reported in batches) and admits again in the next window', async () => {
    const { result, window } = await inOneWindow(async ({ gateway, clock, prefix }) => {
      const a = gateway({ reportEveryMs: 20 });
      const burst = await Promise.all(Array.from({ length: 30 }, () => admit(a.limiter, 'k', 10)));
      // Refused here, without asking Redis: 20 more attempts, answered at once.
      const callsBefore = a.store.calls;
      const later = Array.from({ length: 20 }, () => a.limiter.admit('k', 10));
      const callsAfter = a.store.calls;
      await waitFor('the refusals reported to Redis', () => a.store.reported >= 40, 10_000);
      const counted = Number(await redis.hget(`${prefix}k`, 'n'));
      const ttl = await redis.pttl(`${prefix}k`);
      return { a, clock, burst, later, callsBefore, callsAfter, counted, ttl };
    });
    const { a, clock } = result;
    expect(result.burst.filter((r) => r === undefined)).toHaveLength(10);
    for (const r of result.later) expect(r).toMatchObject({ retryAfterMs: expect.any(Number) });
    expect(result.callsAfter).toBe(result.callsBefore);
    // 10 granted + 20 refused in the burst + 20 refused after it.
    expect(a.store.reported).toBe(40);
    expect(result.counted).toBe(50);
    expect(result.ttl).toBeGreaterThan(0);
    // Refused until the window ends, with a wait that never reaches past its end…
    const refusal = a.limiter.admit('k', 10) as Refusal;
    expect(refusal.retryAfterMs).toBeGreaterThan(0);
    expect(clock.ms + refusal.retryAfterMs).toBeLessThanOrEqual((window + 1) * WINDOW_MS);
    // …and admitted again once Redis's clock has left it.
    await windowEnded(window);
    clock.ms = Date.now();
    expect(await admit(a.limiter, 'k', 10)).toBeUndefined();
  });

  it('takes leases: a key well under its limit costs a few round trips per window, not one per attempt', async () => {
    const { result } = await inOneWindow(async ({ gateway, prefix }) => {
      const a = gateway();
      let admitted = 0;
      for (let i = 0; i < 2_000; i++)
        if ((await admit(a.limiter, 'hot', 1_000_000)) === undefined) admitted++;
      return { admitted, calls: a.store.calls, counted: Number(await redis.hget(`${prefix}hot`, 'n')) };
    });
    expect(result.admitted).toBe(2_000);
    // Leases double from 1 token: 2 000 attempts in at most a dozen takes.
    expect(result.calls).toBeLessThanOrEqual(12);
    // What Redis counted covers what was admitted, and not much more (the lease left over).
    expect(result.counted).toBeGreaterThanOrEqual(2_000);
    expect(result.counted).toBeLessThan(4_100);
  });

  it('a key used once per window takes one token at a time, wasting none of its limit', async () => {
    const { result } = await inOneWindow(async ({ gateway, prefix }) => {
      const a = gateway();
      const b = gateway();
      const admits = [
        await admit(a.limiter, 'light', 3),
        await admit(b.limiter, 'light', 3),
        await admit(a.limiter, 'light', 3),
      ];
      const counted = Number(await redis.hget(`${prefix}light`, 'n'));
      return { admits, counted, fourth: await admit(b.limiter, 'light', 3) };
    });
    expect(result.admits).toEqual([undefined, undefined, undefined]);
    expect(result.counted).toBe(3);
    expect(result.fourth).toBeDefined();
  });

  it("uses the window of Redis's clock, and a lease never outlives its window", async () => {
    const { result } = await inOneWindow(async ({ store }) => {
      const s = store();
      const before = await redisMs();
      const first = await s.take('w', 5, 5, undefined);
      const after = await redisMs();
      // The same window grants nothing more…
      const same = await s.take('w', 5, 5, undefined);
      return { s, before, first, after, same };
    });
    const { s, before, first, after, same } = result;
    expect(first.granted).toBe(5);
    expect(first.window).toBeGreaterThanOrEqual(windowOf(before));
    expect(first.window).toBeLessThanOrEqual(windowOf(after));
    expect(first.resetInMs).toBeGreaterThanOrEqual(WINDOW_MS - (after % WINDOW_MS));
    expect(first.resetInMs).toBeLessThanOrEqual(WINDOW_MS - (before % WINDOW_MS));
    expect(same.window).toBe(first.window);
    expect(same.granted).toBe(0);
    // …and once the time it said is left has passed, a later window grants again.
    await new Promise((resolve) => setTimeout(resolve, same.resetInMs + 10));
    const beforeNext = await redisMs();
    const next = await s.take('w', 5, 5, undefined);
    const afterNext = await redisMs();
    expect(next.window).toBeGreaterThan(first.window);
    expect(next.window).toBeGreaterThanOrEqual(windowOf(beforeNext));
    expect(next.window).toBeLessThanOrEqual(windowOf(afterNext));
    expect(next.granted).toBe(5);
  });

  it('adds a late report of refusals to the previous window, never to the current one', async () => {
    // The report must reach Redis in the very next window: a stall of a whole window in between
    // makes it two windows late (dropped, rightly), so that attempt is made again.
    for (let attempt = 1; ; attempt++) {
      const prefix = freshPrefix();
      const store = new RedisLeaseStore(connection(), prefix, WINDOW_MS);
      const first = await store.take('late', 5, 1, undefined);
      await new Promise((resolve) => setTimeout(resolve, first.resetInMs + 10));
      const next = await store.take('late', 5, 1, { window: first.window, count: 7 });
      expect(next.window).toBeGreaterThan(first.window);
      if (next.window > first.window + 1 && attempt < ATTEMPTS) continue;
      expect(next.window, `every one of ${ATTEMPTS} reports reached Redis two windows late`).toBe(
        first.window + 1,
      );
      expect(next.granted).toBe(1);
      expect(await redis.hmget(`${prefix}late`, 'n', 'p')).toEqual(['1', '8']);
      return;
    }
  });
});

describe('when Redis fails', () => {
  it('limits per process in memory (never unlimited), warns once, and uses Redis again once it answers', async () => {
    const prefix = freshPrefix();
    const redisStore = new RedisLeaseStore(connection(), prefix, WINDOW_MS);
    let down = true;
    const flaky: LeaseStore = {
      take: (...args) =>
        down ? Promise.reject(new Error('Connection is closed.')) : redisStore.take(...args),
    };
    const warnings: string[] = [];
    const infos: string[] = [];
    const logger = {
      ...testLogger('leased'),
      warn: (_obj: unknown, msg: string) => warnings.push(msg),
      info: (msg: string) => infos.push(msg),
    } as unknown as ReturnType<typeof testLogger>;
    // The memory windows and the limiter on a held clock: the burst is in one window whatever the machine does.
    const clock = new HeldClock();
    const store = new FallbackLeaseStore(
      flaky,
      new MemoryLeaseStore(WINDOW_MS, clock.now),
      logger,
      'issuance rate limit',
    );
    const limiter = new LeasedRateLimiter(store, { windowMs: WINDOW_MS, now: clock.now });
    limiters.push(limiter);
    const results = await Promise.all(Array.from({ length: 15 }, () => admit(limiter, 'k', 5)));
    expect(results.filter((r) => r === undefined)).toHaveLength(5);
    expect(results.filter((r) => r !== undefined)).toHaveLength(10);
    expect(store.degraded).toBe(true);
    expect(warnings).toEqual(['issuance rate limit falling back to in-memory limits']);
    expect(await redis.exists(`${prefix}k`)).toBe(0);
    down = false;
    // A later window, for Redis and here: the exhausted lease has ended, so the limiter asks the
    // store again, and the burst's refusals (of the earlier window) do not count against it.
    await windowStart();
    clock.ms = Date.now();
    expect(await admit(limiter, 'k', 5)).toBeUndefined();
    expect(store.degraded).toBe(false);
    expect(infos).toEqual(['issuance rate limit back on redis']);
    expect(Number(await redis.hget(`${prefix}k`, 'n'))).toBeGreaterThanOrEqual(1);
  });

  it('createLeasedRateLimiter without Redis counts in memory', async () => {
    const clock = new HeldClock();
    const limiter = createLeasedRateLimiter(
      undefined,
      { windowMs: WINDOW_MS, now: clock.now },
      testLogger('leased'),
      'x',
    );
    limiters.push(limiter);
    const results = await Promise.all(Array.from({ length: 8 }, () => admit(limiter, 'k', 3)));
    expect(results.filter((r) => r === undefined)).toHaveLength(3);
    expect(results.filter((r) => r !== undefined)).toHaveLength(5);
  });

  it('drops idle keys from memory', async () => {
    let now = 1_000_000;
    const store = new MemoryLeaseStore(1_000, () => now);
    const limiter = new LeasedRateLimiter(store, { windowMs: 1_000, now: () => now });
    limiters.push(limiter);
    for (let i = 0; i < 10; i++) await admit(limiter, `k${i}`, 5);
    expect(limiter.size).toBe(10);
    expect(store.size).toBe(10);
    now += 5_000;
    await admit(limiter, 'other', 5);
    expect(limiter.size).toBe(1);
    expect(store.size).toBe(1);
  });
});
