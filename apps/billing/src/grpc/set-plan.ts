import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { requirePlanId, requireTenantId } from '../domain/requests.ts';
import type { BillingDeps } from './deps.ts';
import { subscriptionMessage } from './messages.ts';

/** SetPlan: moves the tenant to a plan at once (operators; tenants go through checkout). */
export function setPlan({
  planChanges,
}: Pick<BillingDeps, 'planChanges'>): ServiceImpl<typeof BillingService>['setPlan'] {
  return async (req) => {
    requireTenantId(req.tenantId);
    const planId = requirePlanId(req.planId);
    return { subscription: subscriptionMessage(await planChanges.set(req.tenantId, planId)) };
  };
}
