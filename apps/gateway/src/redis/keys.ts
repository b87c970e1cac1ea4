/**
 * Every Redis name the gateway uses, built in one place, as in the other apps: the namespace of
 * the per-key issuance rate's counts and the namespace of its bus channels. The deployment-wide
 * prefix (`GATEWAY_REDIS_PREFIX`) isolates deployments and test files.
 */
export interface RedisKeys {
  /**
   * Namespace of the leased issuance-rate counts (max_issuance_per_second_per_key): the limiter
   * appends the API key's id, one hash per key (shared/lease-1.lua).
   */
  issuanceRate: string;
  /** Prepended to every bus channel name. */
  bus: string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    issuanceRate: `${prefix}issuance-rate:`,
    bus: prefix,
  };
}
