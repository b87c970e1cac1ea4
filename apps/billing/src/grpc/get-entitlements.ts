import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { entitlementsOf } from '../domain/entitlements.ts';
import { planIdOf } from '../domain/plans.ts';
import { requireTenantId } from '../domain/requests.ts';
import type { BillingDeps } from './deps.ts';

/** GetEntitlements: every limit of the tenant's plan, with what exceeding it answers. */
export function getEntitlements({
  plans,
  subscriptions,
}: Pick<BillingDeps, 'plans' | 'subscriptions'>): ServiceImpl<typeof BillingService>['getEntitlements'] {
  return async (req) => {
    requireTenantId(req.tenantId);
    return entitlementsOf(plans[planIdOf(await subscriptions.get(req.tenantId))]);
  };
}
