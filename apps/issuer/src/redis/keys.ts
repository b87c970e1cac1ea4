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
    revoked: (jti) => `${prefix}revoked:{${jti}}`,
    bull: `${prefix}bull`,
    bus: prefix,
  };
}
