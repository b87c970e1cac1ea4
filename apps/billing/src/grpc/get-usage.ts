import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { requireTenantId } from '../domain/requests.ts';
import { requireUsageRange } from '../domain/usage-days.ts';
import type { BillingDeps } from './deps.ts';

/** GetUsage: the tenant's stored daily usage for an inclusive range of UTC days. */
export function getUsage({
  usage,
}: Pick<BillingDeps, 'usage'>): ServiceImpl<typeof BillingService>['getUsage'] {
  return async (req) => {
    requireTenantId(req.tenantId);
    requireUsageRange(req.from, req.to);
    return { days: await usage.days(req.tenantId, req.from, req.to) };
  };
}
