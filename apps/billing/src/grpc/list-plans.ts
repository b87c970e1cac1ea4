import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { BillingDeps } from './deps.ts';
import { catalogueMessage } from './messages.ts';

/** ListPlans: the catalogue (configuration, so built once). */
export function listPlans({
  plans,
}: Pick<BillingDeps, 'plans'>): ServiceImpl<typeof BillingService>['listPlans'] {
  const catalogue = catalogueMessage(plans);
  return async () => ({ plans: catalogue });
}
