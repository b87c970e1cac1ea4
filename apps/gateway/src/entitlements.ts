import { setActiveSpanAttribute } from '@relayplane/shared/tracing';
import type { BillingClient } from './clients.ts';
import { TtlCache } from './ttl-cache.ts';

export interface Entitlements {
  planName: string;
  maxConcurrentConnections: number;
  maxCredentialTtlSeconds: number;
  /** Billing's answer when the connection cap is reached (names the limit and the plan). */
  connectionsExceeded: string;
  /**
   * `max_issuance_per_second_per_key`: credential requests per API key per second; undefined
   * when billing answered none (a billing from before the limit): not rate-limited.
   */
  maxIssuancePerSecondPerKey: number | undefined;
  /** Billing's answer (429) when a key is over that rate (names the limit and the plan). */
  issuanceRateExceeded: string;
}

/** A tenant's plan limits, cached briefly (plan changes also invalidate through the bus). */
export class EntitlementCache {
  readonly #billing: BillingClient;
  readonly #cache: TtlCache<string, Entitlements>;

  constructor(billing: BillingClient, ttlMs: number) {
    this.#billing = billing;
    this.#cache = new TtlCache(ttlMs);
  }

  /** The tenant's entitlements if cached and fresh (no waiting); else undefined. */
  peek(tenantId: string): Entitlements | undefined {
    const cached = this.#cache.peek(tenantId);
    // The hot path's cache decision, on the request's span (tracing.ts; nothing when off).
    setActiveSpanAttribute('relayplane.entitlements.cache', cached ? 'hit' : 'lookup');
    return cached;
  }

  get(tenantId: string): Promise<Entitlements> {
    return this.#cache.get(tenantId, async () => {
      // Billing decides limits and the messages that go with them (GetEntitlements).
      const res = await this.#billing.getEntitlements({ tenantId });
      const find = (limit: string) => res.entitlements.find((e) => e.limit === limit);
      const connections = find('max_concurrent_connections');
      const ttl = find('max_credential_ttl_seconds');
      const rate = find('max_issuance_per_second_per_key');
      return {
        planName: res.planName,
        maxConcurrentConnections: connections?.value ?? 0,
        maxCredentialTtlSeconds: ttl?.value ?? 60,
        connectionsExceeded:
          connections?.exceededMessage ||
          `concurrent connection limit reached on the ${res.planId} plan; upgrade the plan for more`,
        maxIssuancePerSecondPerKey: rate && rate.value > 0 ? rate.value : undefined,
        issuanceRateExceeded:
          rate?.exceededMessage ||
          `rate limit exceeded: max_issuance_per_second_per_key is ${rate?.value} for the ${res.planId} plan`,
      };
    });
  }

  invalidate(tenantId: string): void {
    this.#cache.delete(tenantId);
  }
}
