/**
 * Every Redis name the issuer uses, built in one place: its keys, the bullmq prefix of its
 * maintenance queue and the namespace of its bus channels.
 *
 * Keys carry a hash tag (`{…}`) so that a script touching one tenant's slots stays in one
 * Redis Cluster slot; the process-wide prefix (`ISSUER_REDIS_PREFIX`) isolates deployments
 * and test files from each other.
 */
export interface RedisKeys {
  /** ZSET of the tenant's connection slots: member = credential jti, score = expiry (ms, Redis time). */
  slots(tenantId: string): string;
  /**
   * Beside `slots` (same hash tag, so one script touches both): the cap up to which the slot
   * set is known complete (`all`, or a number after a rebuild read at most that many leases).
   * Missing: the set may have been lost (Redis restarted empty, failed over, flushed) and is
   * rebuilt from PostgreSQL before any reservation is decided.
   */
  slotsMarker(tenantId: string): string;
  /** Marker (value `1`) that a credential is revoked, expiring with the credential. */
  revoked(jti: string): string;
  /** Prefix of the bullmq keys of the scheduler's queue. */
  bull: string;
  /** Prepended to every bus channel name. */
  bus: string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    slots: (tenantId) => `${prefix}slots:{${tenantId}}`,
    slotsMarker: (tenantId) => `${prefix}slots-marker:{${tenantId}}`,
    revoked: (jti) => `${prefix}revoked:{${jti}}`,
    bull: `${prefix}bull`,
    bus: prefix,
  };
}
