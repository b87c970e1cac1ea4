import { ManualClock } from '@relayplane/shared/clock';
import { newId } from '@relayplane/shared/ids';
import { createTestRedis } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { newJti } from '../src/credentials/jwt.ts';
import { redisKeys } from '../src/redis/keys.ts';
import { RedisSlotStore } from '../src/stores/redis-slot-store.ts';
import { MemorySlotStore, type SlotStore } from '../src/stores/slot-store.ts';

/** One implementation under test plus the way to make its leases expire. */
interface Harness {
  store: SlotStore;
  /** Makes every current lease of `tenant` expire (the next reservation prunes them). */
  expireAll(tenant: string): Promise<void>;
}

const testRedis = createTestRedis('slot_store');
const admin = new Redis(testRedis.url);
const keys = redisKeys(testRedis.prefix);

afterAll(async () => {
  await testRedis.clean();
  admin.disconnect();
});

const implementations: Array<[string, () => Harness]> = [
  [
    'RedisSlotStore (Lua script, Redis server time)',
    () => ({
      store: new RedisSlotStore(new Redis(testRedis.url), keys, { ownsConnection: true }),
      // Rewrites the scores into the past: only the script's own TIME-based pruning frees them.
      async expireAll(tenant) {
        const key = keys.slots(tenant);
        const members = await admin.zrange(key, '0', '-1');
        for (const m of members) await admin.zadd(key, 'XX', 1, m);
      },
    }),
  ],
  [
    'MemorySlotStore (embedded mode)',
    () => {
      const clock = new ManualClock(Date.now());
      return {
        store: new MemorySlotStore(() => clock.now().getTime()),
        async expireAll() {
          clock.advance(3_600_001);
        },
      };
    },
  ],
];

describe.each(implementations)('slot store conformance: %s', (_name, make) => {
  const harness = make();
  const { store } = harness;
  const ttl = 600_000;

  afterAll(async () => {
    await store.close();
  });

  it('grants up to the cap and refuses beyond it', async () => {
    const tenant = newId('tenant');
    const jtis = Array.from({ length: 4 }, () => newJti());
    const results = [];
    for (const jti of jtis) results.push(await store.reserve(tenant, jti, ttl, 3));
    expect(results.map((r) => r.granted)).toEqual([true, true, true, false]);
    expect(results.map((r) => r.inUse)).toEqual([1, 2, 3, 3]);
    expect(await store.leases(tenant)).toEqual(jtis.slice(0, 3).sort());
  });

  it('never admits more than the cap under concurrent reservations', async () => {
    for (let round = 0; round < 5; round++) {
      const tenant = newId('tenant');
      const results = await Promise.all(
        Array.from({ length: 40 }, () => store.reserve(tenant, newJti(), ttl, 7)),
      );
      expect(results.filter((r) => r.granted)).toHaveLength(7);
      expect(await store.leases(tenant)).toHaveLength(7);
    }
  });

  it('is idempotent per lease: reserving a held jti again neither fails nor counts twice', async () => {
    const tenant = newId('tenant');
    const jti = newJti();
    expect(await store.reserve(tenant, jti, ttl, 2)).toEqual({ granted: true, inUse: 1 });
    expect(await store.reserve(tenant, jti, ttl, 2)).toEqual({ granted: true, inUse: 1 });
    expect(await store.reserve(tenant, newJti(), ttl, 2)).toEqual({ granted: true, inUse: 2 });
    // At the cap, the held lease is still granted (a retry), a new one is not.
    expect(await store.reserve(tenant, jti, ttl, 2)).toEqual({ granted: true, inUse: 2 });
    expect((await store.reserve(tenant, newJti(), ttl, 2)).granted).toBe(false);
  });

  it('frees a slot on release', async () => {
    const tenant = newId('tenant');
    const a = newJti();
    const b = newJti();
    await store.reserve(tenant, a, ttl, 2);
    await store.reserve(tenant, b, ttl, 2);
    expect((await store.reserve(tenant, newJti(), ttl, 2)).granted).toBe(false);
    await store.release(tenant, a);
    expect(await store.leases(tenant)).toEqual([b]);
    const c = newJti();
    expect(await store.reserve(tenant, c, ttl, 2)).toEqual({ granted: true, inUse: 2 });
    // Releasing an unknown lease is harmless.
    await store.release(tenant, newJti());
    expect(await store.leases(tenant)).toEqual([b, c].sort());
  });

  it('frees slots whose lease expired, with no one releasing them', async () => {
    const tenant = newId('tenant');
    for (let i = 0; i < 3; i++) expect((await store.reserve(tenant, newJti(), ttl, 3)).granted).toBe(true);
    expect((await store.reserve(tenant, newJti(), ttl, 3)).granted).toBe(false);
    await harness.expireAll(tenant);
    expect(await store.leases(tenant)).toEqual([]);
    const fresh = newJti();
    expect(await store.reserve(tenant, fresh, ttl, 3)).toEqual({ granted: true, inUse: 1 });
    expect(await store.leases(tenant)).toEqual([fresh]);
  });

  it('keeps tenants apart, and a cap of 0 refuses everything', async () => {
    const a = newId('tenant');
    const b = newId('tenant');
    expect((await store.reserve(a, newJti(), ttl, 1)).granted).toBe(true);
    expect((await store.reserve(a, newJti(), ttl, 1)).granted).toBe(false);
    expect((await store.reserve(b, newJti(), ttl, 1)).granted).toBe(true);
    expect(await store.reserve(newId('tenant'), newJti(), ttl, 0)).toEqual({ granted: false, inUse: 0 });
  });
});

describe('RedisSlotStore specifics', () => {
  /** Runs `fn` with a store of its own connection, closed afterwards. */
  const withStore = async (fn: (store: RedisSlotStore) => Promise<void>): Promise<void> => {
    const store = new RedisSlotStore(new Redis(testRedis.url), keys, { ownsConnection: true });
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  };

  it('gives the tenant key a TTL equal to its longest lease, in Redis time', async () => {
    await withStore(async (store) => {
      const tenant = newId('tenant');
      await store.reserve(tenant, newJti(), 60_000, 5);
      await store.reserve(tenant, newJti(), 600_000, 5);
      await store.reserve(tenant, newJti(), 120_000, 5);
      const pttl = await admin.pttl(keys.slots(tenant));
      expect(pttl).toBeGreaterThan(590_000);
      expect(pttl).toBeLessThanOrEqual(600_000);
      const [, maxScore] = await admin.zrange(keys.slots(tenant), '-1', '-1', 'WITHSCORES');
      const [seconds] = await admin.time();
      expect(Number(maxScore) - Number(seconds) * 1000).toBeGreaterThan(590_000);
    });
  });

  it('a retried lease keeps its first expiry, below the cap and at it (a retry never extends a slot)', async () => {
    await withStore(async (store) => {
      const tenant = newId('tenant');
      const jti = newJti();
      await store.reserve(tenant, jti, 60_000, 2);
      const first = await admin.zscore(keys.slots(tenant), jti);
      expect(first).not.toBeNull();
      // Below the cap (1 of 2 held) and then at it (2 of 2): same expiry, counted once.
      expect(await store.reserve(tenant, jti, 600_000, 2)).toEqual({ granted: true, inUse: 1 });
      expect(await admin.zscore(keys.slots(tenant), jti)).toBe(first);
      await store.reserve(tenant, newJti(), 60_000, 2);
      expect(await store.reserve(tenant, jti, 600_000, 2)).toEqual({ granted: true, inUse: 2 });
      expect(await admin.zscore(keys.slots(tenant), jti)).toBe(first);
      expect(await admin.pttl(keys.slots(tenant))).toBeLessThanOrEqual(60_000);
    });
  });

  it('in one call, a lease held before and a lease asked twice are each counted once, in order', async () => {
    await withStore(async (store) => {
      const tenant = newId('tenant');
      const [held, a, b, c] = [newJti(), newJti(), newJti(), newJti()];
      await store.reserve(tenant, held, 60_000, 3);
      const calls = store.calls;
      const results = await Promise.all(
        [a, held, a, b, c, b].map((jti) => store.reserve(tenant, jti, 60_000, 3)),
      );
      expect(store.calls - calls).toBe(1);
      expect(results).toEqual([
        { granted: true, inUse: 2 },
        { granted: true, inUse: 2 },
        { granted: true, inUse: 2 },
        { granted: true, inUse: 3 },
        { granted: false, inUse: 3 },
        { granted: true, inUse: 3 },
      ]);
      expect(await store.leases(tenant)).toEqual([held, a, b].sort());
    });
  });

  it('sends the reservations of one turn in one script call, decided in order against the cap', async () => {
    await withStore(async (store) => {
      const tenant = newId('tenant');
      const other = newId('tenant');
      const jtis = Array.from({ length: 8 }, () => newJti());
      const again = jtis[1] as string;
      const calls = store.calls;
      // Eight leases, one asked twice (a retry), and another tenant's lease, all in one turn.
      const results = await Promise.all([
        ...jtis.map((jti) => store.reserve(tenant, jti, 60_000, 5)),
        store.reserve(tenant, again, 60_000, 5),
        store.reserve(other, newJti(), 60_000, 5),
      ]);
      // One call per tenant, not one per reservation.
      expect(store.calls - calls).toBe(2);
      expect(results.map((r) => r.granted)).toEqual([
        true,
        true,
        true,
        true,
        true,
        false,
        false,
        false,
        true,
        true,
      ]);
      expect(results.map((r) => r.inUse)).toEqual([1, 2, 3, 4, 5, 5, 5, 5, 5, 1]);
      expect(await store.leases(tenant)).toEqual(jtis.slice(0, 5).sort());
    });
  });

  it('batches what is asked while a call runs into the next call', async () => {
    await withStore(async (store) => {
      const tenant = newId('tenant');
      const calls = store.calls;
      const first = store.reserve(tenant, newJti(), 60_000, 100);
      // Let the first call go out, then ask for ten more while it is in flight.
      await new Promise((resolve) => setImmediate(resolve));
      const rest: Promise<unknown>[] = [];
      for (let i = 0; i < 10; i++) {
        rest.push(store.reserve(tenant, newJti(), 60_000, 100));
        await Promise.resolve();
      }
      await Promise.all([first, ...rest]);
      expect(store.calls - calls).toBe(2);
      expect((await store.leases(tenant)).length).toBe(11);
    });
  });

  it('fails (throws) rather than answering when Redis is unreachable', async () => {
    const dead = new Redis('redis://127.0.0.1:1', {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 1_000,
      lazyConnect: true,
    });
    dead.on('error', () => {});
    const store = new RedisSlotStore(dead, keys, { ownsConnection: true });
    try {
      const started = performance.now();
      await expect(store.reserve(newId('tenant'), newJti(), 60_000, 5)).rejects.toThrow();
      expect(performance.now() - started).toBeLessThan(1_000);
    } finally {
      await store.close();
    }
  });
});
