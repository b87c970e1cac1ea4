import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { BillingDeps } from './deps.ts';
import { catalogueMessage } from './messages.ts';

/** GetPricing: each plan's price, in catalogue order. */
export function getPricing({
  plans,
}: Pick<BillingDeps, 'plans'>): ServiceImpl<typeof BillingService>['getPricing'] {
  const entries = catalogueMessage(plans).map((p) => ({ planId: p.id, price: p.price }));
  return async () => ({ entries });
}
