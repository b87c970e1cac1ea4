/**
 * Every Redis key the issuer's credential path uses, built in one place.
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
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    slots: (tenantId) => `${prefix}slots:{${tenantId}}`,
    revoked: (jti) => `${prefix}revoked:{${jti}}`,
  };
}
