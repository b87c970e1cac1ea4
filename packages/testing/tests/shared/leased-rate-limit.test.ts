/**
 * The leased per-key limit (the gateway's max_issuance_per_second_per_key) against the test
 * Redis: two limiters with their own connections stand for two gateways sharing one count.
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

const testRedis = createTestRedis('leased');
/** Long enough that a test's burst fits in one window once aligned to its start. */
const WINDOW_MS = 2_000;

/** Counts the store's calls (round trips) a limiter makes. */
class Counting implements LeaseStore {
  calls = 0;
  readonly #inner: LeaseStore;
  constructor(inner: LeaseStore) {
    this.#inner = inner;
  }
  take(key: string, limit: number, want: number, refused: RefusedReport | undefined): Promise<Lease> {
    this.calls++;
    return this.#inner.take(key, limit, want, refused);
  }
}

const connections: Redis[] = [];
const limiters: LeasedRateLimiter[] = [];
let redis: Redis;

function connection(): Redis {
  const c = new Redis(testRedis.url);
  connections.push(c);
  return c;
}

/** A "gateway": its own connection and limiter; `prefix` shared by every gateway of a test. */
function gateway(prefix: string, options: { reportEveryMs?: number } = {}) {
  const store = new Counting(new RedisLeaseStore(connection(), prefix, WINDOW_MS));
  const limiter = new LeasedRateLimiter(store, { windowMs: WINDOW_MS, ...options });
  limiters.push(limiter);
  return { store, limiter };
}

async function admit(limiter: LeasedRateLimiter, key: string, limit: number): Promise<Refusal | undefined> {
  return await limiter.admit(key, limit);
}

async function redisMs(): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Waits until Redis's clock is 50 ms into a window, so a short burst stays in one window. */
async function windowStart(): Promise<void> {
  const now = await redisMs();
  const wait = WINDOW_MS - (now % WINDOW_MS) + 50;
  await new Promise((resolve) => setTimeout(resolve, wait));
}

let prefixes = 0;
const freshPrefix = () => `${testRedis.prefix}rate${++prefixes}:`;

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
    const prefix = freshPrefix();
    const a = gateway(prefix);
    const b = gateway(prefix);
    await windowStart();
    const results = await Promise.all(
      Array.from({ length: 120 }, (_, i) => admit((i % 2 ? a : b).limiter, 'key-1', 50)),
    );
    const admitted = results.filter((r) => r === undefined).length;
    const refusals = results.filter((r): r is Refusal => r !== undefined);
    expect(admitted).toBe(50);
    expect(refusals).toHaveLength(70);
    for (const r of refusals) {
      expect(r.retryAfterMs).toBeGreaterThan(0);
      expect(r.retryAfterMs).toBeLessThanOrEqual(WINDOW_MS);
    }
    // Both gateways refused: neither admitted past the shared count.
    expect(await admit(a.limiter, 'key-1', 50)).toBeDefined();
    expect(await admit(b.limiter, 'key-1', 50)).toBeDefined();
    // Another key of the same tenant has its own count.
    expect(await admit(a.limiter, 'key-2', 50)).toBeUndefined();
    expect(await admit(b.limiter, 'key-2', 50)).toBeUndefined();
  });

  it('counts refused attempts in Redis too (reported in batches) and admits again in the next window', async () => {
    const prefix = freshPrefix();
    const a = gateway(prefix, { reportEveryMs: 20 });
    await windowStart();
    const results = await Promise.all(Array.from({ length: 30 }, () => admit(a.limiter, 'k', 10)));
    expect(results.filter((r) => r === undefined)).toHaveLength(10);
    // Refused locally, without asking Redis: 20 more attempts.
    const callsBefore = a.store.calls;
    for (let i = 0; i < 20; i++)
      expect(a.limiter.admit('k', 10)).toMatchObject({ retryAfterMs: expect.any(Number) });
    expect(a.store.calls).toBe(callsBefore);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // 10 granted + 20 refused in the burst + 20 refused after it.
    expect(Number(await redis.hget(`${prefix}k`, 'n'))).toBe(50);
    expect(await redis.pttl(`${prefix}k`)).toBeGreaterThan(0);
    const refusal = a.limiter.admit('k', 10) as Refusal;
    await new Promise((resolve) => setTimeout(resolve, refusal.retryAfterMs + 20));
    expect(await admit(a.limiter, 'k', 10)).toBeUndefined();
  });

  it('takes leases: a key well under its limit costs a few round trips per window, not one per attempt', async () => {
    const prefix = freshPrefix();
    const a = gateway(prefix);
    await windowStart();
    let admitted = 0;
    for (let i = 0; i < 2_000; i++) if ((await admit(a.limiter, 'hot', 1_000_000)) === undefined) admitted++;
    expect(admitted).toBe(2_000);
    // Leases double from 1 token: 2 000 attempts in at most a dozen takes.
    expect(a.store.calls).toBeLessThanOrEqual(12);
    // What Redis counted covers what was admitted, and not much more (the lease left over).
    const counted = Number(await redis.hget(`${prefix}hot`, 'n'));
    expect(counted).toBeGreaterThanOrEqual(2_000);
    expect(counted).toBeLessThan(4_100);
  });

  it('a key used once per window takes one token at a time, wasting none of its limit', async () => {
    const prefix = freshPrefix();
    const a = gateway(prefix);
    const b = gateway(prefix);
    await windowStart();
    expect(await admit(a.limiter, 'light', 3)).toBeUndefined();
    expect(await admit(b.limiter, 'light', 3)).toBeUndefined();
    expect(await admit(a.limiter, 'light', 3)).toBeUndefined();
    expect(Number(await redis.hget(`${prefix}light`, 'n'))).toBe(3);
    expect(await admit(b.limiter, 'light', 3)).toBeDefined();
  });

  it("uses the window of Redis's clock, and a lease never outlives its window", async () => {
    const prefix = freshPrefix();
    const store = new RedisLeaseStore(connection(), prefix, WINDOW_MS);
    await windowStart();
    const before = await redisMs();
    const first = await store.take('w', 5, 5, undefined);
    const after = await redisMs();
    expect(first.granted).toBe(5);
    expect(first.window).toBeGreaterThanOrEqual(Math.floor(before / WINDOW_MS));
    expect(first.window).toBeLessThanOrEqual(Math.floor(after / WINDOW_MS));
    expect(first.resetInMs).toBeGreaterThanOrEqual(WINDOW_MS - (after % WINDOW_MS));
    expect(first.resetInMs).toBeLessThanOrEqual(WINDOW_MS - (before % WINDOW_MS));
    // The same window grants nothing more…
    const same = await store.take('w', 5, 5, undefined);
    expect(same.window).toBe(first.window);
    expect(same.granted).toBe(0);
    // …and the next one grants again.
    await new Promise((resolve) => setTimeout(resolve, same.resetInMs + 10));
    const next = await store.take('w', 5, 5, undefined);
    expect(next.window).toBe(first.window + 1);
    expect(next.granted).toBe(5);
  });

  it('adds a late report of refusals to the previous window, never to the current one', async () => {
    const prefix = freshPrefix();
    const store = new RedisLeaseStore(connection(), prefix, WINDOW_MS);
    const first = await store.take('late', 5, 1, undefined);
    await new Promise((resolve) => setTimeout(resolve, first.resetInMs + 10));
    const next = await store.take('late', 5, 1, { window: first.window, count: 7 });
    expect(next.window).toBe(first.window + 1);
    expect(next.granted).toBe(1);
    expect(await redis.hmget(`${prefix}late`, 'n', 'p')).toEqual(['1', '8']);
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
    const store = new FallbackLeaseStore(
      flaky,
      new MemoryLeaseStore(WINDOW_MS),
      logger,
      'issuance rate limit',
    );
    const limiter = new LeasedRateLimiter(store, { windowMs: WINDOW_MS });
    limiters.push(limiter);
    await windowStart();
    const results = await Promise.all(Array.from({ length: 15 }, () => admit(limiter, 'k', 5)));
    expect(results.filter((r) => r === undefined)).toHaveLength(5);
    expect(results.filter((r) => r !== undefined)).toHaveLength(10);
    expect(store.degraded).toBe(true);
    expect(warnings).toEqual(['issuance rate limit falling back to in-memory limits']);
    expect(await redis.exists(`${prefix}k`)).toBe(0);
    down = false;
    await windowStart();
    expect(await admit(limiter, 'k', 5)).toBeUndefined();
    expect(store.degraded).toBe(false);
    expect(infos).toEqual(['issuance rate limit back on redis']);
    expect(Number(await redis.hget(`${prefix}k`, 'n'))).toBeGreaterThanOrEqual(1);
  });

  it('createLeasedRateLimiter without Redis counts in memory', async () => {
    const limiter = createLeasedRateLimiter(undefined, { windowMs: WINDOW_MS }, testLogger('leased'), 'x');
    limiters.push(limiter);
    const results = await Promise.all(Array.from({ length: 8 }, () => admit(limiter, 'k', 3)));
    expect(results.filter((r) => r === undefined).length).toBeLessThanOrEqual(3);
    expect(results.filter((r) => r !== undefined).length).toBeGreaterThanOrEqual(5);
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
