/**
 * Concurrent-connection slots: every credential holds one slot of its tenant from issuance
 * until it expires or is revoked, and a tenant never holds more than its plan's cap.
 *
 * Two implementations answer to the same conformance suite (`tests/slot-store.test.ts`):
 * `RedisSlotStore` (distributed mode: one atomic Lua script on the Redis primary, shared by
 * every replica) and `MemorySlotStore` (embedded mode: one process, no Redis).
 *
 * Release at expiry is implicit: every reservation first drops the tenant's leases whose
 * expiry has passed, so no job is needed to free them.
 *
 * Redis may forget (a restart without persistence, a failover to a replica that missed writes,
 * a flush): the durable record of issued credentials (`SlotLedger`, PostgreSQL) is the truth a
 * lost slot set is rebuilt from, and an issuance re-reserves its slot (`confirm`) once its row
 * is durable, so a slot granted by state that was lost meanwhile is decided again.
 */
export interface SlotReservation {
  /** False when the tenant already holds `cap` live slots. */
  granted: boolean;
  /** Live slots of the tenant after the call. */
  inUse: number;
}

/** A credential as the durable record holds it: its lease lasts until the credential expires. */
export interface DurableLease {
  jti: string;
  expiresAtMs: number;
}

/** Where lost slot state is rebuilt from: the record written before a credential is handed out. */
export interface SlotLedger {
  /** The tenant's live, unrevoked credentials, longest-lived first, at most `limit`. */
  liveLeases(tenantId: string, limit: number): Promise<DurableLease[]>;
}

/** The ledger could not be read, so a lost slot set could not be rebuilt (the caller refuses). */
export class SlotLedgerUnavailableError extends Error {
  constructor(cause: unknown) {
    super('the credential record could not be read to rebuild connection slots', { cause });
    this.name = 'SlotLedgerUnavailableError';
  }
}

export interface SlotStore {
  /**
   * Where a lost slot set is rebuilt from. Set once, before the first reservation, by the
   * issuance path, which writes that record.
   */
  recoverFrom(ledger: SlotLedger): void;
  /**
   * Reserves a slot for lease `jti` lasting `ttlMs`, unless the tenant already holds `cap`.
   * Idempotent per jti: reserving a held lease again grants it without counting it twice.
   * Throws when the store cannot answer (the caller must then refuse: fail closed).
   */
  reserve(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation>;
  /**
   * Reserves again, once the credential's row is durable, a lease `reserve` granted: granted
   * without counting twice while the lease is held; decided against the cap if the slot state
   * was lost meanwhile (a rebuild that read the ledger before the row existed did not count
   * it). Decided ahead of new reservations of the tenant. Refused: the credential must not be
   * handed out.
   */
  confirm(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation>;
  /** Frees the lease (revocation, or an issuance that failed after reserving). */
  release(tenantId: string, jti: string): Promise<void>;
  /**
   * Sets the lease's expiry to now + `ttlMs`, adding it if it is not held, whatever the cap: a
   * live relay session's lease, renewed at each revalidation (an admitted session is never
   * refused for the cap; a plan lowered below the live count refuses new connects only).
   */
  renew(tenantId: string, leaseId: string, ttlMs: number): Promise<void>;
  /** The tenant's live leases (expired ones excluded), for tests and diagnostics. */
  leases(tenantId: string): Promise<string[]>;
  /**
   * How many live leases the tenant holds now: the count its next decision compares with the cap
   * (GetTenantConnections). A set lost and not yet rebuilt (by the tenant's next reservation)
   * counts what it holds since. Throws when the store cannot answer.
   */
  held(tenantId: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * A tenant's slots in memory (lease → expiry), and up to which cap they are known complete.
 * `expiries` orders the leases by expiry, so that dropping the expired ones costs O(log n)
 * each, not a scan of every live lease per reservation: a tenant can hold hundreds of
 * thousands (a profile of embedded issuance at ~1,700/s with 10-minute credentials spent 40 %
 * of its CPU in that scan).
 */
interface MemoryTenant {
  leases: Map<string, number>;
  expiries: ExpiryHeap;
  covers: number;
}

/**
 * A binary min-heap of (expiry, jti). An entry whose lease was released or replaced stays
 * until it surfaces, and is then skipped (its expiry no longer matches the lease's); the heap
 * is rebuilt from the leases when such entries outnumber the live ones.
 */
class ExpiryHeap {
  #at: number[] = [];
  #jti: string[] = [];

  get size(): number {
    return this.#at.length;
  }

  push(at: number, jti: string): void {
    const at_ = this.#at;
    const jtis = this.#jti;
    let i = at_.length;
    at_.push(at);
    jtis.push(jti);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const parentAt = at_[parent] as number;
      if (parentAt <= at) break;
      at_[i] = parentAt;
      jtis[i] = jtis[parent] as string;
      i = parent;
    }
    at_[i] = at;
    jtis[i] = jti;
  }

  /** Removes every entry due at or before `now`, handing each to `expire`. */
  popDue(now: number, expire: (jti: string, at: number) => void): void {
    while (this.#at.length > 0 && (this.#at[0] as number) <= now) {
      const at = this.#at[0] as number;
      const jti = this.#jti[0] as string;
      this.#removeTop();
      expire(jti, at);
    }
  }

  /** Replaces the contents with `leases`. */
  rebuild(leases: Map<string, number>): void {
    this.#at = [];
    this.#jti = [];
    for (const [jti, at] of leases) this.push(at, jti);
  }

  #removeTop(): void {
    const at_ = this.#at;
    const jtis = this.#jti;
    const lastAt = at_.pop() as number;
    const lastJti = jtis.pop() as string;
    const n = at_.length;
    if (n === 0) return;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && (at_[right] as number) < (at_[left] as number) ? right : left;
      if ((at_[child] as number) >= lastAt) break;
      at_[i] = at_[child] as number;
      jtis[i] = jtis[child] as string;
      i = child;
    }
    at_[i] = lastAt;
    jtis[i] = lastJti;
  }
}

/** Stale heap entries (released leases) tolerated before a rebuild, beyond the live ones. */
const HEAP_SLACK = 1024;

/**
 * The in-process twin for embedded mode. `now` is the service clock in milliseconds.
 *
 * A restart loses these slots while the credentials they held live on (the embedded database
 * persists), so a tenant is loaded from the ledger when this process first decides for it,
 * exactly as Redis rebuilds a lost set. Decisions themselves are synchronous, on a loaded
 * tenant: reservations that waited for the load are decided in the order they were asked.
 */
export class MemorySlotStore implements SlotStore {
  readonly #now: () => number;
  /** One entry per tenant decided for since start (embedded mode serves a handful). */
  readonly #tenants = new Map<string, MemoryTenant>();
  readonly #loading = new Map<string, Promise<void>>();
  #ledger: SlotLedger | undefined;

  constructor(now: () => number) {
    this.#now = now;
  }

  recoverFrom(ledger: SlotLedger): void {
    this.#ledger = ledger;
  }

  /** The loaded tenant, expired leases dropped, if what is held decides exactly at `cap`. */
  #ready(tenantId: string, cap: number): MemoryTenant | undefined {
    const tenant = this.#tenants.get(tenantId);
    if (!tenant || tenant.covers < cap) return undefined;
    const { leases, expiries } = tenant;
    expiries.popDue(this.#now(), (jti, at) => {
      if (leases.get(jti) === at) leases.delete(jti);
    });
    if (expiries.size > 2 * leases.size + HEAP_SLACK) expiries.rebuild(leases);
    return tenant;
  }

  /** Loads the tenant's live credentials from the ledger; concurrent callers share one read. */
  async #load(tenantId: string, cap: number): Promise<void> {
    let loading = this.#loading.get(tenantId);
    if (!loading) {
      loading = this.#read(tenantId, cap)
        .then((seed) => {
          const now = this.#now();
          const tenant = this.#tenants.get(tenantId) ?? {
            leases: new Map<string, number>(),
            expiries: new ExpiryHeap(),
            covers: 0,
          };
          for (const { jti, expiresAtMs } of seed) {
            if (expiresAtMs > now && !tenant.leases.has(jti)) {
              tenant.leases.set(jti, expiresAtMs);
              tenant.expiries.push(expiresAtMs, jti);
            }
          }
          // Fewer than asked: the ledger had no more, so these decide exactly at any cap.
          tenant.covers = seed.length < cap ? Number.POSITIVE_INFINITY : cap;
          this.#tenants.set(tenantId, tenant);
        })
        .finally(() => this.#loading.delete(tenantId));
      this.#loading.set(tenantId, loading);
    }
    await loading;
  }

  async #read(tenantId: string, cap: number): Promise<DurableLease[]> {
    if (cap === 0 || !this.#ledger) return [];
    try {
      return await this.#ledger.liveLeases(tenantId, cap);
    } catch (err) {
      throw new SlotLedgerUnavailableError(err);
    }
  }

  async reserve(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation> {
    let tenant = this.#ready(tenantId, cap);
    while (!tenant) {
      await this.#load(tenantId, cap);
      tenant = this.#ready(tenantId, cap);
    }
    const { leases } = tenant;
    if (leases.has(jti)) return { granted: true, inUse: leases.size };
    if (leases.size >= cap) return { granted: false, inUse: leases.size };
    const expiry = this.#now() + ttlMs;
    leases.set(jti, expiry);
    tenant.expiries.push(expiry, jti);
    return { granted: true, inUse: leases.size };
  }

  /** One process: nothing is lost between a reservation and its confirmation. */
  confirm(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation> {
    return this.reserve(tenantId, jti, ttlMs, cap);
  }

  async release(tenantId: string, jti: string): Promise<void> {
    this.#tenants.get(tenantId)?.leases.delete(jti);
  }

  async renew(tenantId: string, leaseId: string, ttlMs: number): Promise<void> {
    let tenant = this.#tenants.get(tenantId);
    if (!tenant) {
      // Not loaded yet: the lease waits in an entry that covers no cap, so the first
      // reservation still loads the ledger (and keeps this lease, as a rebuilt Redis set does).
      tenant = { leases: new Map(), expiries: new ExpiryHeap(), covers: 0 };
      this.#tenants.set(tenantId, tenant);
    }
    const expiry = this.#now() + ttlMs;
    tenant.leases.set(leaseId, expiry);
    tenant.expiries.push(expiry, leaseId);
  }

  async leases(tenantId: string): Promise<string[]> {
    return [...(this.#ready(tenantId, 0)?.leases.keys() ?? [])].sort();
  }

  async held(tenantId: string): Promise<number> {
    return this.#ready(tenantId, 0)?.leases.size ?? 0;
  }

  async close(): Promise<void> {
    this.#tenants.clear();
  }
}
