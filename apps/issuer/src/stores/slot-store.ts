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
 */
export interface SlotReservation {
  /** False when the tenant already holds `cap` live slots. */
  granted: boolean;
  /** Live slots of the tenant after the call. */
  inUse: number;
}

export interface SlotStore {
  /**
   * Reserves a slot for lease `jti` lasting `ttlMs`, unless the tenant already holds `cap`.
   * Idempotent per jti: reserving a held lease again grants it without counting it twice.
   * Throws when the store cannot answer (the caller must then refuse: fail closed).
   */
  reserve(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation>;
  /** Frees the lease (revocation, or an issuance that failed after reserving). */
  release(tenantId: string, jti: string): Promise<void>;
  /** The tenant's live leases (expired ones excluded), for tests and diagnostics. */
  leases(tenantId: string): Promise<string[]>;
  close(): Promise<void>;
}

/** The in-process twin for embedded mode. `now` is the service clock in milliseconds. */
export class MemorySlotStore implements SlotStore {
  readonly #now: () => number;
  readonly #tenants = new Map<string, Map<string, number>>();

  constructor(now: () => number) {
    this.#now = now;
  }

  #live(tenantId: string): Map<string, number> | undefined {
    const leases = this.#tenants.get(tenantId);
    if (!leases) return undefined;
    const now = this.#now();
    for (const [jti, expiry] of leases) if (expiry <= now) leases.delete(jti);
    if (leases.size === 0) {
      this.#tenants.delete(tenantId);
      return undefined;
    }
    return leases;
  }

  async reserve(tenantId: string, jti: string, ttlMs: number, cap: number): Promise<SlotReservation> {
    const leases = this.#live(tenantId) ?? new Map<string, number>();
    if (leases.has(jti)) return { granted: true, inUse: leases.size };
    if (leases.size >= cap) return { granted: false, inUse: leases.size };
    leases.set(jti, this.#now() + ttlMs);
    this.#tenants.set(tenantId, leases);
    return { granted: true, inUse: leases.size };
  }

  async release(tenantId: string, jti: string): Promise<void> {
    const leases = this.#tenants.get(tenantId);
    leases?.delete(jti);
    if (leases?.size === 0) this.#tenants.delete(tenantId);
  }

  async leases(tenantId: string): Promise<string[]> {
    return [...(this.#live(tenantId)?.keys() ?? [])].sort();
  }

  async close(): Promise<void> {
    this.#tenants.clear();
  }
}
