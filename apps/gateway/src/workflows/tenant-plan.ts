/**
 * The operator's tenant use cases: admin owns tenants (404 for an unknown one, platform admins
 * only), billing owns plans (docs/CONTRIBUTING.md, "Use cases across services").
 */
import type { Principal, Tenant } from '@relayplane/proto/admin';
import type { SetPlanResponse } from '@relayplane/proto/billing';
import type { AdminClient, BillingClient } from '../clients.ts';
import { required } from '../present.ts';

export async function setTenantPlan(
  clients: { admin: AdminClient; billing: BillingClient },
  input: { principal: Principal; tenantId: string; planId: string },
): Promise<SetPlanResponse> {
  await clients.admin.getTenant({ principal: input.principal, tenantId: input.tenantId });
  return clients.billing.setPlan({ tenantId: input.tenantId, planId: input.planId });
}

export interface TenantWithPlan {
  tenant: Tenant;
  memberCount: number;
  planId: string;
}

/**
 * A page of every tenant with its plan: admin answers the page (platform admins only, so a
 * refusal asks billing nothing), then billing the plans of that page's tenants in one call
 * (GetSubscriptions, at most one page). Two reads: a failure of either fails the page, nothing
 * to undo. A plan changed between the two calls shows as it is after the change.
 */
export async function listTenantsWithPlans(
  clients: { admin: AdminClient; billing: BillingClient },
  input: { principal: Principal; limit: number; cursor: string },
): Promise<{ tenants: TenantWithPlan[]; nextCursor: string }> {
  const page = await clients.admin.listTenants(input);
  const listed = page.tenants.map((t) => ({
    tenant: required(t.tenant, 'listTenants.tenant'),
    memberCount: t.memberCount,
  }));
  const tenantIds = listed.map((t) => t.tenant.id);
  const { subscriptions } =
    tenantIds.length === 0 ? { subscriptions: [] } : await clients.billing.getSubscriptions({ tenantIds });
  const plans = new Map(subscriptions.map((s) => [s.tenantId, s.planId]));
  const tenants = listed.map((t) => ({
    ...t,
    planId: required(plans.get(t.tenant.id), 'getSubscriptions.subscription'),
  }));
  return { tenants, nextCursor: page.nextCursor };
}
