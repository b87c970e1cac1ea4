import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { planIdOf } from '../domain/plans.ts';
import { requireTenantIds } from '../domain/requests.ts';
import type { BillingDeps } from './deps.ts';

/**
 * GetSubscriptions: GetSubscription's subscription for each tenant asked (a page of the operator's
 * tenant list), in one query; a tenant without a subscription row is on the default plan.
 */
export function getSubscriptions({
  subscriptions,
}: Pick<BillingDeps, 'subscriptions'>): ServiceImpl<typeof BillingService>['getSubscriptions'] {
  return async (req) => {
    requireTenantIds(req.tenantIds);
    const found = new Map((await subscriptions.getMany(req.tenantIds)).map((s) => [s.tenantId, s]));
    return {
      subscriptions: req.tenantIds.map((tenantId) => {
        const sub = found.get(tenantId);
        return {
          tenantId,
          planId: planIdOf(sub),
          updatedAt: sub ? timestampFromDate(sub.updatedAt) : undefined,
        };
      }),
    };
  };
}
