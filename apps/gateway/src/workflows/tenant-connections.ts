/**
 * A tenant's concurrency against its cap: the issuer holds the sessions and the slots, billing the
 * plan's cap (docs/CONTRIBUTING.md, "Use cases across services").
 */
import { entitlementOf } from '@relayplane/contract/entitlements';
import type { BillingClient, IssuerClient } from '../clients.ts';

export interface TenantConnections {
  liveSessions: number;
  slotsHeld: number;
  cap: number;
}

/**
 * Two independent reads, asked together: the issuer's counts now, and the cap as billing decides
 * it now (GetEntitlements, not the gateway's issuance cache: a plan just changed shows at once).
 * A failure of either fails the answer; nothing to undo.
 */
export async function tenantConnections(
  clients: { issuer: IssuerClient; billing: BillingClient },
  tenantId: string,
): Promise<TenantConnections> {
  const [counts, entitlements] = await Promise.all([
    clients.issuer.getTenantConnections({ tenantId }),
    clients.billing.getEntitlements({ tenantId }),
  ]);
  return {
    liveSessions: counts.liveSessions,
    slotsHeld: counts.slotsHeld,
    cap: entitlementOf(entitlements, 'max_concurrent_connections').value,
  };
}
