import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import {
  builtinCheckoutRefusal,
  type CheckoutSession,
  idempotencyKeyOf,
  PAID_CHECKOUT_OFF_REASON,
  publicBaseUrlOf,
  replayOf,
} from '../domain/checkout.ts';
import { planIdOf } from '../domain/plans.ts';
import { requirePlanId, requireTenantId } from '../domain/requests.ts';
import { checkoutThrottleKey } from '../redis/keys.ts';
import type { BillingDeps } from './deps.ts';
import { checkoutMessage } from './messages.ts';

type CreateDeps = Pick<
  BillingDeps,
  | 'plans'
  | 'subscriptions'
  | 'checkoutSessions'
  | 'provider'
  | 'builtinPaidCheckout'
  | 'checkoutThrottle'
  | 'checkout'
  | 'clock'
  | 'logger'
  | 'audit'
  | 'recordAlone'
>;

/**
 * CreateCheckoutSession: throttled per tenant, idempotent per Idempotency-Key (a replay answers
 * the stored session, unthrottled and without a provider call). The session is stored before
 * the provider is called, so a concurrent request with the same key finds it.
 *
 * The built-in provider takes no payment: a paid plan is refused (`unprocessable`) unless
 * `BILLING_BUILTIN_PAID_CHECKOUT` is on, and the refusal is recorded (`checkout.create`, outcome
 * denied). It comes after the throttle, so refusals, and their audit rows, are bounded per tenant.
 */
export function createCheckoutSession(
  deps: CreateDeps,
): ServiceImpl<typeof BillingService>['createCheckoutSession'] {
  const { plans, subscriptions, checkoutSessions: sessions, provider, clock, logger } = deps;
  return async (req) => {
    requireTenantId(req.tenantId);
    const planId = requirePlanId(req.planId);
    const key = idempotencyKeyOf(req.idempotencyKey);
    const publicBaseUrl = publicBaseUrlOf(req.publicBaseUrl);

    if (key !== null) {
      const earlier = await sessions.byIdempotencyKey(req.tenantId, key);
      if (earlier)
        return { session: checkoutMessage(replayOf(earlier, planId, clock.now())), replayed: true };
    }

    const hit = await deps.checkoutThrottle.hit(checkoutThrottleKey(req.tenantId));
    if (hit.count > deps.checkout.maxPerWindow) {
      const retryAfterSeconds = Math.max(1, Math.ceil(hit.resetInMs / 1000));
      throw new AppError(
        'rate_limited',
        `too many checkout sessions for this tenant; retry in ${retryAfterSeconds} seconds`,
        { retryAfterSeconds },
      );
    }

    const plan = plans[planId];
    if (planIdOf(await subscriptions.get(req.tenantId)) === planId) {
      throw new AppError('conflict', `the tenant is already on the ${planId} plan`);
    }
    if (provider.name === 'builtin') {
      const off = builtinCheckoutRefusal(plan, deps.builtinPaidCheckout);
      if (off !== undefined) {
        await deps.recordAlone({
          action: 'checkout.create',
          tenantId: req.tenantId,
          outcome: 'denied',
          target: { type: 'tenant', id: req.tenantId },
          details: { plan_id: planId, provider: provider.name, reason: PAID_CHECKOUT_OFF_REASON },
        });
        logger.info(
          { tenantId: req.tenantId, planId },
          'built-in checkout of a paid plan refused (paid checkout is off)',
        );
        throw new AppError('unprocessable', off);
      }
    }
    const refusal = provider.refuses(plan);
    if (refusal !== undefined) throw new AppError('invalid_request', refusal);

    const now = clock.now();
    const session: CheckoutSession = {
      id: newId('checkoutSession'),
      tenantId: req.tenantId,
      planId,
      provider: provider.name,
      status: 'open',
      url: '',
      providerReference: null,
      idempotencyKey: key,
      createdAt: now,
      expiresAt: new Date(now.getTime() + deps.checkout.sessionTtlSeconds * 1000),
      completedAt: null,
    };
    if (!(await sessions.insert(session))) {
      const earlier = key === null ? undefined : await sessions.byIdempotencyKey(req.tenantId, key);
      if (!earlier) throw new Error('checkout session insert conflicted but no session was found');
      return { session: checkoutMessage(replayOf(earlier, planId, clock.now())), replayed: true };
    }
    let created: { url: string; reference: string | null };
    try {
      created = await provider.createCheckout({
        sessionId: session.id,
        tenantId: session.tenantId,
        plan,
        publicBaseUrl,
        expiresAt: session.expiresAt,
      });
    } catch (err) {
      // Forgotten, so the same Idempotency-Key may try again.
      await sessions.delete(session.id);
      logger.error({ err, tenantId: session.tenantId, provider: provider.name }, 'checkout provider failed');
      throw new AppError('internal', 'the billing provider could not create a checkout session', {
        cause: err,
      });
    }
    try {
      await sessions.setProviderResult(session.id, created.url, created.reference, (trx) =>
        deps.audit.enqueue(trx, {
          action: 'checkout.create',
          tenantId: session.tenantId,
          target: { type: 'checkout_session', id: session.id },
          details: { plan_id: planId, provider: session.provider },
        }),
      );
    } catch (err) {
      // Not created after all (its event could not be recorded): the same key may try again.
      await sessions.delete(session.id).catch(() => {});
      throw err;
    }
    deps.audit.kick();
    logger.info(
      { checkoutSessionId: session.id, tenantId: session.tenantId, planId, provider: session.provider },
      'checkout session created',
    );
    return {
      session: checkoutMessage({ ...session, url: created.url, providerReference: created.reference }),
      replayed: false,
    };
  };
}
