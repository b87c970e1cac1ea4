import type { GatewayClients } from './clients.ts';
import { TtlCache } from './ttl-cache.ts';

export interface Entitlements {
  planId: string;
  planName: string;
  maxConcurrentConnections: number;
  maxCredentialTtlSeconds: number;
}

/** The channel billing announces plan changes on (payload: tenant id). */
export const PLAN_CHANGED = 'plans.changed';

/** A tenant's plan limits, cached briefly (plan changes also invalidate through the bus). */
export class EntitlementCache {
  readonly #billing: GatewayClients['billing'];
  readonly #cache: TtlCache<string, Entitlements>;

  constructor(billing: GatewayClients['billing'], ttlMs: number) {
    this.#billing = billing;
    this.#cache = new TtlCache(ttlMs);
  }

  get(tenantId: string): Promise<Entitlements> {
    return this.#cache.get(tenantId, async () => {
      const { plan } = await this.#billing.getSubscription({ tenantId });
      return {
        planId: plan?.id ?? 'free',
        planName: plan?.name ?? 'Free',
        maxConcurrentConnections: plan?.limits?.maxConcurrentConnections ?? 0,
        maxCredentialTtlSeconds: plan?.limits?.maxCredentialTtlSeconds ?? 60,
      };
    });
  }

  invalidate(tenantId: string): void {
    this.#cache.delete(tenantId);
  }
}
