import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../src/db/migrations/index.ts';
import type { IssuerDatabase } from '../src/db/schema.ts';
import { CredentialStore } from '../src/issuance/credential-store.ts';
import { CredentialWriter } from '../src/issuance/credential-writer.ts';
import { RedisSlotStore } from '../src/issuance/redis-slot-store.ts';
import {
  MemorySlotStore,
  type SlotLedger,
  SlotLedgerUnavailableError,
  type SlotStore,
} from '../src/issuance/slot-store.ts';
import { newJti } from '../src/keys/jwt.ts';
import { redisKeys } from '../src/redis/keys.ts';
import { RevocationStore } from '../src/revocation/revocation-store.ts';

/** One implementation under test plus the ways to make its leases expire and to lose them. */
interface Harness {
  store: SlotStore;
  /** The store's notion of now (ms): credentials recorded for it expire relative to this. */
  now(): number;
  /** Makes every current lease of `tenant` expire (the next reservation prunes them). */
  expireAll(tenant: string): Promise<void>;
  /**
   * The store once `tenant`'s slots are lost — Redis: its keys gone, as a FLUSHALL, an empty
   * restart or a failover to an empty replica leaves them; memory: a new process.
   */
  lose(tenant: string): Promise<SlotStore>;
}

const testRedis = createTestRedis('slot_store');
const admin = new Redis(testRedis.url);
const keys = redisKeys(testRedis.prefix);
let database: TestDatabase;
let issuerDb: Database<IssuerDatabase>;
let credentials: CredentialStore;
let revocations: RevocationStore;
let writer: CredentialWriter;
/** The credentials table, as issuance records it: what a lost slot set is rebuilt from. */
const ledger: SlotLedger = { liveLeases: (tenant, limit) => credentials.liveLeases(tenant, limit) };

beforeAll(async () => {
  database = await createTestDatabase('slot_store');
  issuerDb = await createDatabase<IssuerDatabase>(
    { kind: 'postgres', url: database.url },
    'issuer',
    testLogger('slot-store'),
  );
  await issuerDb.migrate(migrations);
  credentials = new CredentialStore(issuerDb.db);
  revocations = new RevocationStore(issuerDb.db);
  writer = new CredentialWriter(issuerDb);
});

afterAll(async () => {
  await testRedis.clean();
  admin.disconnect();
  await issuerDb?.destroy();
  await database?.drop();
});

/** Records credentials of `tenant` expiring at `expiresAtMs`, as issuance does before answering. */
async function recorded(tenant: string, jtis: string[], expiresAtMs: number): Promise<void> {
  await Promise.all(
    jtis.map((jti) =>
      writer.write({
        jti,
        tenantId: tenant,
        projectId: newId('project'),
        apiKeyId: newId('apiKey'),
        kid: 'k'.repeat(43),
        mode: 'live',
        scopes: 'relay:session',
        issuedAt: new Date(expiresAtMs - 3_600_000),
        expiresAt: new Date(expiresAtMs),
      }),
    ),
  );
}

/** A Redis slot store on its own connection, rebuilding from the credentials table. */
function redisStore(): RedisSlotStore {
  const store = new RedisSlotStore(new Redis(testRedis.url), keys, { ownsConnection: true });
  store.recoverFrom(ledger);
  return store;
}

const implementations: Array<[string, () => Harness]> = [
  [
    'RedisSlotStore (Lua script, Redis server time)',
    () => {
      const store = redisStore();
      return {
        store,
        now: () => Date.now(),
        // Rewrites the scores into the past: only the script's own TIME-based pruning frees them.
        async expireAll(tenant) {
          const key = keys.slots(tenant);
          const members = await admin.zrange(key, '0', '-1');
          for (const m of members) await admin.zadd(key, 'XX', 1, m);
        },
        async lose(tenant) {
          await admin.del(keys.slots(tenant), keys.slotsMarker(tenant));
          return store;
        },
      };
    },
  ],
  [
    'MemorySlotStore (embedded mode)',
    () => {
      const clock = new ManualClock(Date.now());
      const memoryStore = () => {
        const store = new MemorySlotStore(() => clock.now().getTime());
        store.recoverFrom(ledger);
        return store;
      };
      return {
        store: memoryStore(),
        now: () => clock.now().getTime(),
        async expireAll() {
          clock.advance(3_600_001);
        },
        async lose() {
          return memoryStore();
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

  it('confirms a held lease without counting it twice, at the cap too', async () => {
    const tenant = newId('tenant');
    const jti = newJti();
    await store.reserve(tenant, jti, ttl, 2);
    expect(await store.confirm(tenant, jti, ttl, 2)).toEqual({ granted: true, inUse: 1 });
    await store.reserve(tenant, newJti(), ttl, 2);
    expect(await store.confirm(tenant, jti, ttl, 2)).toEqual({ granted: true, inUse: 2 });
    expect(await store.leases(tenant)).toHaveLength(2);
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

  it('renews a lease whatever the cap: held or lapsed, it counts once and is never refused', async () => {
    const tenant = newId('tenant');
    const session = 's:00ff';
    await store.reserve(tenant, newJti(), ttl, 2);
    await store.reserve(tenant, newJti(), ttl, 2);
    // At the cap: a renewal still holds a slot (a live session is never refused for the cap).
    await store.renew(tenant, session, ttl);
    expect(await store.leases(tenant)).toHaveLength(3);
    expect(await store.leases(tenant)).toContain(session);
    await store.renew(tenant, session, ttl);
    expect(await store.leases(tenant)).toHaveLength(3);
    // And it counts against new reservations.
    expect((await store.reserve(tenant, newJti(), ttl, 3)).granted).toBe(false);
    await store.release(tenant, session);
    expect((await store.reserve(tenant, newJti(), ttl, 3)).granted).toBe(true);
  });

  it('lets a renewed lease lapse with no one releasing it', async () => {
    const tenant = newId('tenant');
    await store.renew(tenant, 's:0aa', ttl);
    expect(await store.leases(tenant)).toEqual(['s:0aa']);
    await harness.expireAll(tenant);
    expect(await store.leases(tenant)).toEqual([]);
    expect(await store.reserve(tenant, newJti(), ttl, 1)).toEqual({ granted: true, inUse: 1 });
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

  it('counts the live leases a tenant holds: what its next decision compares with the cap', async () => {
    const tenant = newId('tenant');
    expect(await store.held(tenant)).toBe(0);
    const a = newJti();
    await store.reserve(tenant, a, ttl, 5);
    await store.reserve(tenant, newJti(), ttl, 5);
    await store.renew(tenant, 's:0bb', ttl);
    expect(await store.held(tenant)).toBe(3);
    await store.release(tenant, a);
    expect(await store.held(tenant)).toBe(2);
    expect((await store.reserve(tenant, newJti(), ttl, 3)).inUse).toBe(3);
    expect(await store.held(tenant)).toBe(3);
    expect(await store.held(newId('tenant'))).toBe(0);
    // Expired leases no longer count, before any decision prunes them.
    await harness.expireAll(tenant);
    expect(await store.held(tenant)).toBe(0);
  });

  it('keeps tenants apart, and a cap of 0 refuses everything', async () => {
    const a = newId('tenant');
    const b = newId('tenant');
    expect((await store.reserve(a, newJti(), ttl, 1)).granted).toBe(true);
    expect((await store.reserve(a, newJti(), ttl, 1)).granted).toBe(false);
    expect((await store.reserve(b, newJti(), ttl, 1)).granted).toBe(true);
    expect(await store.reserve(newId('tenant'), newJti(), ttl, 0)).toEqual({ granted: false, inUse: 0 });
  });

  it('rebuilds lost slots from the credential record: refused at the cap, freed by revocation and expiry', async () => {
    const tenant = newId('tenant');
    const jtis = [newJti(), newJti(), newJti()];
    for (const jti of jtis) expect((await store.reserve(tenant, jti, ttl, 3)).granted).toBe(true);
    await recorded(tenant, jtis, harness.now() + ttl);

    const lost = await harness.lose(tenant);
    expect(await lost.reserve(tenant, newJti(), ttl, 3)).toEqual({ granted: false, inUse: 3 });
    expect(await lost.leases(tenant)).toEqual([...jtis].sort());

    // A credential revoked in the record holds no slot in the next rebuild.
    const [revoked, ...kept] = jtis as [string, ...string[]];
    await revocations.revoke(tenant, revoked, new Date());
    const again = await harness.lose(tenant);
    const fresh = newJti();
    expect(await again.reserve(tenant, fresh, ttl, 3)).toEqual({ granted: true, inUse: 3 });
    expect(await again.leases(tenant)).toEqual([...kept, fresh].sort());

    // Rebuilt leases end with their credentials.
    await harness.expireAll(tenant);
    expect((await again.reserve(tenant, newJti(), ttl, 3)).granted).toBe(true);
    expect(await again.leases(tenant)).toHaveLength(1);
  });

  it('refuses (throws) when slots must be rebuilt and the credential record cannot be read', async () => {
    const tenant = newId('tenant');
    const lost = await harness.lose(tenant);
    lost.recoverFrom({ liveLeases: () => Promise.reject(new Error('connect ECONNREFUSED')) });
    try {
      await expect(lost.reserve(tenant, newJti(), ttl, 3)).rejects.toBeInstanceOf(SlotLedgerUnavailableError);
      expect(await lost.leases(tenant)).toEqual([]);
    } finally {
      lost.recoverFrom(ledger);
    }
    expect(await lost.reserve(tenant, newJti(), ttl, 3)).toEqual({ granted: true, inUse: 1 });
  });
});

describe('MemorySlotStore specifics', () => {
  const tenant = 'ten_memory_specifics';

  it('frees each lease exactly when its own expiry passes, whatever order the leases came in', async () => {
    const clock = new ManualClock(Date.now());
    const start = clock.now().getTime();
    const store = new MemorySlotStore(() => clock.now().getTime());
    // TTLs (s) out of order, so that insertion order says nothing about expiry order.
    const ttls = new Map<string, number>();
    for (const ttl of [600, 60, 3600, 120, 60, 900, 300, 61, 3599, 240]) {
      const jti = newJti();
      ttls.set(jti, ttl);
      expect((await store.reserve(tenant, jti, ttl * 1000, 100)).granted).toBe(true);
    }
    const aliveAt = (seconds: number) =>
      [...ttls]
        .filter(([, ttl]) => ttl > seconds)
        .map(([jti]) => jti)
        .sort();
    for (const seconds of [59, 60, 61, 119, 120, 299, 600, 3598, 3599, 3600]) {
      clock.set(new Date(start + seconds * 1000));
      expect(await store.leases(tenant), `at ${seconds} s`).toEqual(aliveAt(seconds));
    }
  });

  it('stays exact after many releases (released leases neither count nor free anyone else early)', async () => {
    const clock = new ManualClock(Date.now());
    const start = clock.now().getTime();
    const store = new MemorySlotStore(() => clock.now().getTime());
    const held: string[] = [];
    for (let i = 0; i < 3_000; i++) {
      const jti = newJti();
      held.push(jti);
      await store.reserve(tenant, jti, 60_000, 3_010);
    }
    for (const jti of held.splice(0, 2_500)) await store.release(tenant, jti);
    const shortLived: string[] = [];
    for (let i = 0; i < 10; i++) {
      const jti = newJti();
      shortLived.push(jti);
      expect((await store.reserve(tenant, jti, 30_000, 510)).granted).toBe(true);
    }
    // 500 + 10 held: the cap of 510 is reached, the released ones do not count.
    expect(await store.reserve(tenant, newJti(), 30_000, 510)).toEqual({ granted: false, inUse: 510 });
    clock.set(new Date(start + 30_000));
    expect(await store.leases(tenant)).toEqual([...held].sort());
    clock.set(new Date(start + 60_000));
    expect(await store.leases(tenant)).toEqual([]);
  });
});

describe('RedisSlotStore specifics', () => {
  /** Runs `fn` with a store of its own connection, closed afterwards. */
  const withStore = async (fn: (store: RedisSlotStore) => Promise<void>): Promise<void> => {
    const store = redisStore();
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  };

  /** A tenant Redis already knows (its slot set rebuilt, from an empty record), holding nothing. */
  const knownTenant = async (store: RedisSlotStore): Promise<string> => {
    const tenant = newId('tenant');
    const jti = newJti();
    await store.reserve(tenant, jti, 60_000, 1);
    await store.release(tenant, jti);
    expect(await admin.get(keys.slotsMarker(tenant))).toBe('all');
    return tenant;
  };

  it('gives the tenant key a TTL equal to its longest lease, in Redis time, and its marker a day more', async () => {
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
      // The marker never expires before a lease it vouches for.
      const markerTtl = await admin.pttl(keys.slotsMarker(tenant));
      expect(markerTtl - pttl).toBeGreaterThan(86_400_000 - 1_000);
      expect(markerTtl - pttl).toBeLessThanOrEqual(86_400_000 + 1_000);
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
      const tenant = await knownTenant(store);
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
      const tenant = await knownTenant(store);
      const other = await knownTenant(store);
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
      const tenant = await knownTenant(store);
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
    store.recoverFrom(ledger);
    try {
      const started = performance.now();
      await expect(store.reserve(newId('tenant'), newJti(), 60_000, 5)).rejects.toThrow();
      expect(performance.now() - started).toBeLessThan(1_000);
    } finally {
      await store.close();
    }
  });
});

describe('RedisSlotStore after Redis lost its data', () => {
  const ttl = 600_000;
  const stores: RedisSlotStore[] = [];
  const fresh = (): RedisSlotStore => {
    const store = redisStore();
    stores.push(store);
    return store;
  };
  /** What FLUSHALL or an empty restart does to the tenant, without touching other tests' keys. */
  const flush = (tenant: string) => admin.del(keys.slots(tenant), keys.slotsMarker(tenant));

  afterAll(async () => {
    for (const store of stores) await store.close();
  });

  it('seeds the lost set from live, unrevoked credentials, each lease expiring with its credential', async () => {
    const store = fresh();
    const tenant = newId('tenant');
    const now = Date.now();
    const live = [newJti(), newJti(), newJti()];
    const expiries = [now + 100_000, now + 300_000, now + 200_000];
    for (const [i, jti] of live.entries()) await recorded(tenant, [jti], expiries[i] as number);
    // Neither a revoked nor an expired credential holds a slot.
    const revoked = newJti();
    await recorded(tenant, [revoked], now + 400_000);
    await revocations.revoke(tenant, revoked, new Date());
    await recorded(tenant, [newJti()], now - 1_000);

    const calls = store.calls;
    expect(await store.reserve(tenant, newJti(), ttl, 3)).toEqual({ granted: false, inUse: 3 });
    // One call found no marker and decided nothing, one brought the seed and decided.
    expect(store.calls - calls).toBe(2);
    expect(store.rebuilds).toBe(1);
    expect(await store.leases(tenant)).toEqual([...live].sort());
    for (const [i, jti] of live.entries()) {
      expect(Number(await admin.zscore(keys.slots(tenant), jti))).toBe(expiries[i]);
    }
    // Three rows asked, three came back: complete up to a cap of 3.
    expect(await admin.get(keys.slotsMarker(tenant))).toBe('3');
    const pttl = await admin.pttl(keys.slots(tenant));
    expect(pttl).toBeGreaterThan(290_000);
    expect(pttl).toBeLessThanOrEqual(300_000);

    // Known now: the next reservation is one call, no read of the record.
    const known = store.calls;
    expect((await store.reserve(tenant, newJti(), ttl, 3)).granted).toBe(false);
    expect(store.calls - known).toBe(1);
    expect(store.rebuilds).toBe(1);
  });

  it('never exceeds the cap when two replicas rebuild the same tenant at once (the later seed is ignored)', async () => {
    for (let round = 0; round < 5; round++) {
      const tenant = newId('tenant');
      const held = [newJti(), newJti(), newJti()];
      await recorded(tenant, held, Date.now() + ttl);
      // Both replicas read the record before either seeds Redis.
      let reads = 0;
      let bothRead: () => void = () => {};
      const barrier = new Promise<void>((resolve) => {
        bothRead = resolve;
      });
      const racingLedger: SlotLedger = {
        async liveLeases(t, limit) {
          const rows = await credentials.liveLeases(t, limit);
          if (++reads === 2) bothRead();
          await barrier;
          return rows;
        },
      };
      const [a, b] = [fresh(), fresh()];
      a.recoverFrom(racingLedger);
      b.recoverFrom(racingLedger);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).reserve(tenant, newJti(), ttl, 5)),
      );
      expect(reads, `round ${round}`).toBe(2);
      expect(
        results.filter((r) => r.granted),
        `round ${round}`,
      ).toHaveLength(2);
      const leases = await a.leases(tenant);
      expect(leases).toHaveLength(5);
      expect(leases).toEqual(expect.arrayContaining(held));
    }
  });

  it('re-decides at confirmation a slot granted by the lost state before its row committed', async () => {
    for (const cap of [2, 3]) {
      const tenant = newId('tenant');
      const [issuing, other] = [fresh(), fresh()];
      // In flight on one replica: its slot granted, its row not committed yet.
      const inFlight = newJti();
      expect((await issuing.reserve(tenant, inFlight, ttl, cap)).granted).toBe(true);
      // Redis loses everything; another replica rebuilds from a record without that row, and
      // fills the cap.
      await flush(tenant);
      const others = [newJti(), newJti()];
      for (const jti of others) expect((await other.reserve(tenant, jti, ttl, cap)).granted).toBe(true);
      await recorded(tenant, others, Date.now() + ttl);
      expect(await other.leases(tenant)).toEqual([...others].sort());
      // Now the in-flight row commits, and the issuance confirms its slot.
      await recorded(tenant, [inFlight], Date.now() + ttl);
      const confirmed = await issuing.confirm(tenant, inFlight, ttl, cap);
      if (cap === 2) {
        // The cap is full without it: refused, never counted.
        expect(confirmed).toEqual({ granted: false, inUse: 2 });
        expect(await issuing.leases(tenant)).toEqual([...others].sort());
      } else {
        expect(confirmed).toEqual({ granted: true, inUse: 3 });
        expect(await issuing.leases(tenant)).toEqual([...others, inFlight].sort());
      }
    }
  });

  it('confirms from the record when Redis lost the set after the row committed (no other rebuild)', async () => {
    const store = fresh();
    const tenant = newId('tenant');
    const jti = newJti();
    expect((await store.reserve(tenant, jti, ttl, 1)).granted).toBe(true);
    await recorded(tenant, [jti], Date.now() + ttl);
    await flush(tenant);
    const rebuilds = store.rebuilds;
    expect(await store.confirm(tenant, jti, ttl, 1)).toEqual({ granted: true, inUse: 1 });
    expect(store.rebuilds - rebuilds).toBe(1);
    expect(await store.leases(tenant)).toEqual([jti]);
  });

  it('decides confirmations ahead of new reservations, in the same call', async () => {
    const store = fresh();
    const tenant = newId('tenant');
    const confirming = newJti();
    expect((await store.reserve(tenant, confirming, ttl, 2)).granted).toBe(true);
    // Its lease went missing (a failover to a replica that missed the write) while the marker stayed.
    await admin.zrem(keys.slots(tenant), confirming);
    const calls = store.calls;
    const [first, second, confirmation] = await Promise.all([
      store.reserve(tenant, newJti(), ttl, 2),
      store.reserve(tenant, newJti(), ttl, 2),
      store.confirm(tenant, confirming, ttl, 2),
    ]);
    expect(store.calls - calls).toBe(1);
    expect(confirmation).toEqual({ granted: true, inUse: 1 });
    expect(first).toEqual({ granted: true, inUse: 2 });
    expect(second).toEqual({ granted: false, inUse: 2 });
  });

  it('reads the record again for a cap above what the last rebuild covered (credentials beyond the old cap still count)', async () => {
    const store = fresh();
    const tenant = newId('tenant');
    // Five live credentials, then the plan went down to a cap of 3, then Redis lost the set.
    await recorded(tenant, [newJti(), newJti(), newJti(), newJti(), newJti()], Date.now() + ttl);
    expect(await store.reserve(tenant, newJti(), ttl, 3)).toEqual({ granted: false, inUse: 3 });
    expect(await admin.get(keys.slotsMarker(tenant))).toBe('3');
    // The plan goes up to 6: five are live, one more fits.
    const rebuilds = store.rebuilds;
    expect(await store.reserve(tenant, newJti(), ttl, 6)).toEqual({ granted: true, inUse: 6 });
    expect(store.rebuilds - rebuilds).toBe(1);
    expect(await admin.get(keys.slotsMarker(tenant))).toBe('all');
    expect((await store.reserve(tenant, newJti(), ttl, 6)).granted).toBe(false);
  });

  it('seeds a tenant holding more leases than one script call adds at once (chunked ZADD)', async () => {
    const store = fresh();
    const tenant = newId('tenant');
    const jtis = Array.from({ length: 2_500 }, () => newJti());
    await recorded(tenant, jtis, Date.now() + ttl);
    await writer.flushed();
    const started = performance.now();
    expect(await store.reserve(tenant, newJti(), ttl, 2_500)).toEqual({ granted: false, inUse: 2_500 });
    console.log(
      `rebuilt 2500 leases (one indexed read, one seeded script call) in ${Math.round(performance.now() - started)} ms`,
    );
    expect((await store.leases(tenant)).length).toBe(2_500);
  });
});
