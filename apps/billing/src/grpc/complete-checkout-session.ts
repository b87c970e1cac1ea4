import { DEFAULT_PLAN, isPlanId } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import {
  builtinCheckoutRefusal,
  type CheckoutSession,
  PAID_CHECKOUT_OFF_REASON,
} from '../domain/checkout.ts';
import type { Subscription } from '../stores/subscriptions.ts';
import { findCheckoutSession } from './checkout-sessions.ts';
import type { BillingDeps } from './deps.ts';
import { checkoutMessage, subscriptionMessage } from './messages.ts';

type CompleteDeps = Pick<
  BillingDeps,
  | 'plans'
  | 'builtinPaidCheckout'
  | 'checkoutSessions'
  | 'subscriptions'
  | 'planChanges'
  | 'clock'
  | 'logger'
  | 'recordAlone'
>;

/**
 * CompleteCheckoutSession: confirms a built-in checkout (Stripe completes through webhooks);
 * the tenant moves to the session's plan. Completing a completed session answers it again,
 * changing nothing. A session of a paid plan is not completed while paid built-in checkout is
 * off (`unprocessable`, recorded as a denied `checkout.confirm`), even one created while it was
 * on: turning the setting off closes the sessions already handed out too. The session stays open.
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
    if (!isPlanId(session.planId)) throw new Error(`checkout session ${session.id} names no known plan`);
    const off = builtinCheckoutRefusal(deps.plans[session.planId], deps.builtinPaidCheckout);
    if (off !== undefined) {
      await deps.recordAlone({
        action: 'checkout.confirm',
        tenantId: session.tenantId,
        outcome: 'denied',
        target: { type: 'checkout_session', id: session.id },
        details: { plan_id: session.planId, provider: session.provider, reason: PAID_CHECKOUT_OFF_REASON },
      });
      deps.logger.info(
        { checkoutSessionId: id, tenantId: session.tenantId, planId: session.planId },
        'built-in checkout confirmation of a paid plan refused (paid checkout is off)',
      );
      throw new AppError('unprocessable', off);
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
