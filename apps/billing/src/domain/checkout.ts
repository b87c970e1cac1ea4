/**
 * Checkout sessions, how a tenant changes plan: what a creation request may carry, when a
 * session counts as expired, and how a repeated Idempotency-Key is answered. Pure.
 */
import { IDEMPOTENCY_KEY_PATTERN } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { isPaidPlan, type Plan } from './plans.ts';

export type CheckoutStatus = 'open' | 'completed' | 'expired';

export interface CheckoutSession {
  id: string;
  tenantId: string;
  planId: string;
  provider: string;
  status: CheckoutStatus;
  /** Empty while the provider call is in flight. */
  url: string;
  providerReference: string | null;
  idempotencyKey: string | null;
  createdAt: Date;
  expiresAt: Date;
  completedAt: Date | null;
}

export const CHECKOUT_NOT_FOUND_MESSAGE = 'checkout session not found';

/** The Idempotency-Key of a creation request; null when none was sent (an empty value). */
export function idempotencyKeyOf(raw: string): string | null {
  if (raw === '') return null;
  if (!IDEMPOTENCY_KEY_PATTERN.test(raw)) {
    throw new AppError('invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters');
  }
  return raw;
}

/** Where the gateway serves pages, without a trailing slash. */
export function publicBaseUrlOf(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('invalid_request', 'public_base_url must be an absolute http(s) URL');
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash) {
    throw new AppError('invalid_request', 'public_base_url must be an http(s) URL without query or fragment');
  }
  return raw.replace(/\/+$/, '');
}

/** The session as callers see it: an open session past its expiry is expired. */
export function sessionView(session: CheckoutSession, now: Date): CheckoutSession {
  if (session.status === 'open' && session.expiresAt.getTime() <= now.getTime()) {
    return { ...session, status: 'expired' };
  }
  return session;
}

/**
 * The answer to a creation whose Idempotency-Key the tenant used before: the earlier session,
 * if it was for the same plan and its provider call has finished.
 */
export function replayOf(earlier: CheckoutSession, planId: string, now: Date): CheckoutSession {
  if (earlier.planId !== planId) {
    throw new AppError('conflict', 'this Idempotency-Key was already used for a checkout to another plan');
  }
  if (earlier.url === '') {
    throw new AppError('conflict', 'a checkout request with this Idempotency-Key is still in progress');
  }
  return sessionView(earlier, now);
}

/** The setting that lets the built-in provider check out paid plans (docs/billing.md). */
export const BUILTIN_PAID_CHECKOUT_SETTING = 'BILLING_BUILTIN_PAID_CHECKOUT';

/** `details.reason` of the `checkout.create` / `checkout.confirm` events that record the refusal. */
export const PAID_CHECKOUT_OFF_REASON = 'builtin_paid_checkout_off';

/**
 * Why a built-in checkout of `plan` is refused (`unprocessable`, 422), or undefined when it may
 * go ahead: the built-in provider takes no payment, so it checks out a paid plan only when the
 * operator allowed it (`paidCheckout`). A free plan (a downgrade) always goes ahead.
 */
export function builtinCheckoutRefusal(plan: Plan, paidCheckout: boolean): string | undefined {
  if (paidCheckout || !isPaidPlan(plan)) return undefined;
  return (
    `checkout of the paid ${plan.id} plan is off: the built-in billing provider takes no payment. ` +
    `An operator can allow it with ${BUILTIN_PAID_CHECKOUT_SETTING}=true (demos, trusted users), ` +
    'or a platform admin can set the plan'
  );
}
