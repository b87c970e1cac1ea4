import { loadScript } from '@relayplane/shared/redis-scripts';
import { inBatchSpan, type SpanContext, sampledSpanContext } from '@relayplane/shared/tracing';
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../redis/keys.ts';
import {
  type DurableLease,
  type SlotLedger,
  SlotLedgerUnavailableError,
  type SlotReservation,
  type SlotStore,
} from './slot-store.ts';

/**
 * keys = slot set, marker; args = cap, seed coverage, seed size, seed leases, then jti and
 * lifetime in ms of each lease. Answers 0 (rebuild needed), or 1 then granted and in-use per lease.
 */
const RESERVE_SLOTS = loadScript(new URL('./reserve-slots-2.lua', import.meta.url));
const RENEW_SLOT = loadScript(new URL('./renew-slot-1.lua', import.meta.url));

/** At most this many leases go in one script call (its run time blocks Redis). */
const MAX_SLOT_BATCH = 256;
/** Script calls in flight at once per tenant; leases asked meanwhile wait and go together. */
const MAX_SLOT_CALLS_PER_TENANT = 1;

interface Pending {
  jti: string;
  ttlMs: number;
  resolve: (r: SlotReservation) => void;
  reject: (err: unknown) => void;
  /** The asking issuance's span when traced and sampled: the script call's span links to it. */
  trace: SpanContext | undefined;
}

interface TenantQueue {
  /** Confirmations: decided before new reservations (their credentials are recorded already). */
  confirming: Pending[];
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
 *
 * Surviving Redis data loss. A marker beside each slot set says up to which cap the set is
 * known complete; Redis losing the set loses the marker with it (same instance, same hash
 * tag). Without it the script decides nothing and asks for a rebuild: this store reads the
 * tenant's live, unrevoked credentials from the ledger (PostgreSQL: one indexed range scan,
 * at most `cap` rows, longest-lived first) and calls again with them as a seed; the script adds
 * the seed's unexpired leases (one ZADD per 1000), sets the marker and decides the batch,
 * atomically — if another replica's seed got there first, this one is ignored. The tenant's
 * other reservations on this replica wait in its queue meanwhile, and those on other replicas
 * keep answering "rebuild needed" until a marker exists: nothing is decided on a lost set.
 *
 * The rebuild cannot see a credential whose slot was granted by the lost state but whose row
 * commits after the ledger was read. `confirm` closes that window: once its row is durable,
 * every issuance reserves its jti again (idempotent: a held lease is granted without counting
 * twice; a missing one is decided against the cap). It rides in the tenant's next script call,
 * ahead of new reservations, so a busy tenant pays no extra round trip for it; an idle one
 * pays one per batch.
 */
export class RedisSlotStore implements SlotStore {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;
  readonly #ownsConnection: boolean;
  readonly #tenants = new Map<string, TenantQueue>();
  #ledger: SlotLedger | undefined;
  /** Script calls made so far (tests read it to see batching happen). */
  calls = 0;
  /** Slot sets this store rebuilt from the ledger, seeds ignored included (tests read it). */
  rebuilds = 0;

  constructor(redis: Redis, keys: RedisKeys, options: { ownsConnection?: boolean } = {}) {
    this.#redis = redis;
    this.#keys = keys;
    this.#ownsConnection = options.ownsConnection ?? false;
  }

  recoverFrom(ledger: SlotLedger): void {
    this.#ledger = ledger;
  }

  reserve(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation> {
    return this.#enqueue(tenantId, jti, ttlMs, cap, 'pending');
  }

  confirm(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation> {
    return this.#enqueue(tenantId, jti, ttlMs, cap, 'confirming');
  }

  #enqueue(
    tenantId: string,
    jti: string,
    ttlMs: number,
    cap: number,
    list: 'pending' | 'confirming',
  ): Promise<SlotReservation> {
    let queue = this.#tenants.get(tenantId);
    if (!queue) {
      queue = { confirming: [], pending: [], cap, running: 0, scheduled: false };
      this.#tenants.set(tenantId, queue);
    }
    // The cap as the latest caller knows it (a plan change reaches every request soon after).
    queue.cap = Math.max(0, Math.floor(cap));
    const done = new Promise<SlotReservation>((resolve, reject) =>
      queue[list].push({ jti, ttlMs: Math.ceil(ttlMs), resolve, reject, trace: sampledSpanContext() }),
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
    const waiting = () => queue.confirming.length + queue.pending.length;
    while (waiting() > 0 && queue.running < MAX_SLOT_CALLS_PER_TENANT) {
      const batch = queue.confirming.splice(0, MAX_SLOT_BATCH);
      const confirming = batch.length;
      batch.push(...queue.pending.splice(0, MAX_SLOT_BATCH - batch.length));
      queue.running++;
      // One span for the script call(s), linked to every traced issuance in the batch (docs/tracing.md).
      void inBatchSpan(
        'reserve slots',
        batch,
        (p) => p.trace,
        (span) => span.setAttribute('relayplane.slots.confirmations', confirming),
        () => this.#call(tenantId, queue.cap, batch),
      ).finally(() => {
        queue.running--;
        if (waiting() > 0) this.#start(tenantId, queue);
        else if (queue.running === 0 && !queue.scheduled) this.#tenants.delete(tenantId);
      });
    }
  }

  async #call(tenantId: string, cap: number, batch: Pending[]): Promise<void> {
    const leases: (string | number)[] = [];
    for (const p of batch) leases.push(p.jti, p.ttlMs);
    try {
      let out = await this.#run(tenantId, cap, ['', 0], leases);
      if (out[0] === 0) {
        const seed = await this.#readLedger(tenantId, cap);
        this.rebuilds++;
        const args: (string | number)[] = [seed.length < cap ? 'all' : cap, seed.length];
        for (const lease of seed) args.push(lease.jti, lease.expiresAtMs);
        out = await this.#run(tenantId, cap, args, leases);
      }
      if (out[0] !== 1) throw new Error('reserve-slots asked for a rebuild it was given');
      batch.forEach((p, i) => {
        const granted = out[1 + 2 * i];
        const inUse = out[2 + 2 * i];
        if (granted === undefined || inUse === undefined)
          p.reject(new Error('short answer from reserve-slots'));
        else p.resolve({ granted: granted === 1, inUse });
      });
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }

  #run(
    tenantId: string,
    cap: number,
    seed: (string | number)[],
    leases: (string | number)[],
  ): Promise<number[]> {
    this.calls++;
    return RESERVE_SLOTS.run(
      this.#redis,
      [this.#keys.slots(tenantId), this.#keys.slotsMarker(tenantId)],
      [cap, ...seed, ...leases],
    ) as Promise<number[]>;
  }

  async #readLedger(tenantId: string, cap: number): Promise<DurableLease[]> {
    if (cap === 0) return [];
    try {
      if (!this.#ledger) throw new Error('no ledger to rebuild connection slots from');
      return await this.#ledger.liveLeases(tenantId, cap);
    } catch (err) {
      throw new SlotLedgerUnavailableError(err);
    }
  }

  async release(tenantId: string, jti: string): Promise<void> {
    await this.#redis.zrem(this.#keys.slots(tenantId), jti);
  }

  async renew(tenantId: string, leaseId: string, ttlMs: number): Promise<void> {
    await RENEW_SLOT.run(this.#redis, [this.#keys.slots(tenantId)], [ttlMs, leaseId]);
  }

  async leases(tenantId: string): Promise<string[]> {
    const now = await this.#redisNow();
    return (await this.#redis.zrangebyscore(this.#keys.slots(tenantId), `(${now}`, '+inf')).sort();
  }

  /** The leases the script would keep now (it prunes those expiring at or before its TIME). */
  async held(tenantId: string): Promise<number> {
    const now = await this.#redisNow();
    return this.#redis.zcount(this.#keys.slots(tenantId), `(${now}`, '+inf');
  }

  /** Same notion of "now" as the script: the Redis server's clock, in ms. */
  async #redisNow(): Promise<number> {
    const [seconds, micros] = await this.#redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  async close(): Promise<void> {
    if (this.#ownsConnection) this.#redis.disconnect();
  }
}
