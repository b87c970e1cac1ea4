/**
 * Every Redis name billing uses, built in one place: the checkout throttle's counters, the
 * bullmq prefix of the usage job's queue and the namespace of its bus channels. The
 * deployment-wide prefix (`BILLING_REDIS_PREFIX`) isolates deployments and test files.
 */
export interface RedisKeys {
  /**
   * Namespace of the checkout throttle's fixed-window counters; the rate limiter prepends it
   * to each `checkoutThrottleKey`.
   */
  throttle: string;
  /** Prefix of the bullmq keys of the scheduler's queue. */
  bull: string;
  /** Prepended to every bus channel name. */
  bus: string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    throttle: `${prefix}billing:throttle:`,
    bull: `${prefix}bull`,
    bus: prefix,
  };
}

/** A tenant's checkout creations, within the throttle's namespace (the in-memory limiter uses it as is). */
export function checkoutThrottleKey(tenantId: string): string {
  return `checkout:${tenantId}`;
}

/** A client's bad webhook signatures in one aggregation window (providers/bad-signatures.ts), within the throttle's namespace. */
export function badSignatureKey(client: string, window: number): string {
  return `webhook-bad-signature:${client}:${window}`;
}
