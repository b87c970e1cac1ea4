import type { BillingService } from '@relayplane/proto/billing';
import { DEFAULT_PLAN } from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { CheckoutSession } from '../domain/checkout.ts';
import type { Subscription } from '../stores/subscriptions.ts';
import { findCheckoutSession } from './checkout-sessions.ts';
import type { BillingDeps } from './deps.ts';
import { checkoutMessage, subscriptionMessage } from './messages.ts';

type CompleteDeps = Pick<
  BillingDeps,
  'checkoutSessions' | 'subscriptions' | 'planChanges' | 'clock' | 'logger'
>;

/**
 * CompleteCheckoutSession: confirms a built-in checkout (Stripe completes through webhooks);
 * the tenant moves to the session's plan. Completing a completed session answers it again,
 * changing nothing.
 */
export function completeCheckoutSession(
  deps: CompleteDeps,
): ServiceImpl<typeof BillingService>['completeCheckoutSession'] {
  const complete = async (id: string): Promise<{ session: CheckoutSession; subscription: Subscription }> => {
    const session = await findCheckoutSession(deps, id);
    if (session.provider !== 'builtin') {
      throw new AppError('invalid_request', `this checkout session is completed through ${session.provider}`);
    }
    if (session.status === 'completed') {
      const sub = await deps.subscriptions.get(session.tenantId);
      return {
        session,
        subscription: sub ?? {
          tenantId: session.tenantId,
          planId: DEFAULT_PLAN,
          updatedAt: session.createdAt,
        },
      };
    }
    if (session.status === 'expired') {
      await deps.checkoutSessions.expire(session.id);
      throw new AppError('invalid_request', 'this checkout session has expired; start a new one');
    }
    const result = await deps.planChanges.completeCheckout(session.id);
    // Completed concurrently by another call: answer as a repeat.
    if (!result) return complete(id);
    deps.logger.info(
      { checkoutSessionId: id, tenantId: result.session.tenantId, planId: result.session.planId },
      'checkout session completed',
    );
    return result;
  };
  return async (req) => {
    const { session, subscription } = await complete(req.id);
    return { session: checkoutMessage(session), subscription: subscriptionMessage(subscription) };
  };
}
