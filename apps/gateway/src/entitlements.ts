import { type EntitlementsAnswer, entitlementOf, type GateLimit } from '@relayplane/contract/entitlements';
import { type IssuancePolicy, issuancePolicyOf } from '@relayplane/contract/issuance-policy';
import { setActiveSpanAttribute } from '@relayplane/shared/tracing';
import type { BillingClient } from './clients.ts';
import { TtlCache } from './ttl-cache.ts';

/** What the issuance route needs of a tenant's plan, all of it as billing decided and worded it. */
export interface Entitlements {
  /** Decides each request (decideIssuance) here and, as the authority, in the issuer. */
  policy: IssuancePolicy;
  /**
   * `max_issuance_per_second_per_key`: credential requests per API key per second (429 with
   * billing's message when over it); undefined when billing answered none or 0: not limited.
   */
  issuanceRate: GateLimit | undefined;
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
    return this.#cache.get(tenantId, async () =>
      entitlementsOf(await this.#billing.getEntitlements({ tenantId })),
    );
  }

  invalidate(tenantId: string): void {
    this.#cache.delete(tenantId);
  }
}

/** A GetEntitlements answer as the issuance route reads it; a limit missing from it: 500. */
export function entitlementsOf(answer: EntitlementsAnswer): Entitlements {
  // A billing from before the per-key rate answers none: that key is not limited (not a made-up limit).
  const rate = answer.entitlements.some((e) => e.limit === 'max_issuance_per_second_per_key')
    ? entitlementOf(answer, 'max_issuance_per_second_per_key')
    : undefined;
  return { policy: issuancePolicyOf(answer), issuanceRate: rate && rate.value > 0 ? rate : undefined };
}
