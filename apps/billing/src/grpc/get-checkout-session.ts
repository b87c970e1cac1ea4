import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { findCheckoutSession } from './checkout-sessions.ts';
import type { BillingDeps } from './deps.ts';
import { checkoutMessage } from './messages.ts';

/** GetCheckoutSession: the session as callers see it (an open one past its expiry is expired). */
export function getCheckoutSession(
  deps: Pick<BillingDeps, 'checkoutSessions' | 'clock'>,
): ServiceImpl<typeof BillingService>['getCheckoutSession'] {
  return async (req) => ({ session: checkoutMessage(await findCheckoutSession(deps, req.id)) });
}
