/**
 * An operator's plan change: admin owns tenants (404 for an unknown one, platform admins only),
 * billing owns plans (docs/CONTRIBUTING.md, "Use cases across services").
 */
import type { Principal } from '@relayplane/proto/admin';
import type { SetPlanResponse } from '@relayplane/proto/billing';
import type { AdminClient, BillingClient } from '../clients.ts';

export async function setTenantPlan(
  clients: { admin: AdminClient; billing: BillingClient },
  input: { principal: Principal; tenantId: string; planId: string },
): Promise<SetPlanResponse> {
  await clients.admin.getTenant({ principal: input.principal, tenantId: input.tenantId });
  return clients.billing.setPlan({ tenantId: input.tenantId, planId: input.planId });
}
