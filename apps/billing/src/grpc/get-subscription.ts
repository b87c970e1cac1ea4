import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { planIdOf } from '../domain/plans.ts';
import { requireTenantId } from '../domain/requests.ts';
import type { BillingDeps } from './deps.ts';
import { planMessage } from './messages.ts';

/** GetSubscription: the tenant's plan; a tenant without a subscription is on the default plan. */
export function getSubscription({
  plans,
  subscriptions,
}: Pick<BillingDeps, 'plans' | 'subscriptions'>): ServiceImpl<typeof BillingService>['getSubscription'] {
  return async (req) => {
    requireTenantId(req.tenantId);
    const sub = await subscriptions.get(req.tenantId);
    const planId = planIdOf(sub);
    return {
      subscription: {
        tenantId: req.tenantId,
        planId,
        updatedAt: sub ? timestampFromDate(sub.updatedAt) : undefined,
      },
      plan: planMessage(plans[planId]),
    };
  };
}
