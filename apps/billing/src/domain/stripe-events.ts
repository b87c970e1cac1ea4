/**
 * Which verified Stripe events may change a plan, and in what order. Pure.
 *
 * - A checkout grants its plan only once it is paid for: `payment_status` `paid` or
 *   `no_payment_required` (a delayed payment method completes the session `unpaid` first, and
 *   `checkout.session.async_payment_succeeded` follows when the money arrives).
 * - Stripe does not deliver events in order, and retries for days. So the subscription events
 *   that decide a plan are applied only when they come after the last one applied for the same
 *   subscription, by the event's `created` (Unix seconds) and, within the same second, by event
 *   id (an arbitrary order, but the same on every replica and every retry) — except that an event
 *   ending the subscription (deleted, or `canceled` / `incomplete_expired`, which Stripe never
 *   leaves) comes after anything else of its second. A subscription that ended takes no further
 *   event: a late `updated: active` after `deleted` changes nothing.
 */

/** Stripe's `payment_status` values of a checkout session that was paid for (or needed no payment). */
const PAID_STATUSES: ReadonlySet<string> = new Set(['paid', 'no_payment_required']);

/** Whether a checkout session with this `payment_status` grants its plan. */
export function paymentGrants(paymentStatus: unknown): boolean {
  return typeof paymentStatus === 'string' && PAID_STATUSES.has(paymentStatus);
}

/** Where an event stands in its subscription's history. */
export interface EventPosition {
  /** The event's `created`. */
  at: Date;
  eventId: string;
}

/** What was last applied for one subscription. */
export interface SubscriptionOrder extends EventPosition {
  /** The subscription ended; nothing for it is applied any more. */
  ended: boolean;
}

/** Whether `event` comes after `last` (later `created`, or the same second and a greater id). */
export function isAfter(event: EventPosition, last: EventPosition): boolean {
  const diff = event.at.getTime() - last.at.getTime();
  return diff > 0 || (diff === 0 && event.eventId > last.eventId);
}

/**
 * Whether a subscription event that decides a plan is applied, given what was applied before;
 * `ends`: the event ends the subscription (it wins a tie of seconds, so a cancellation in the
 * same second as an update is never lost to the update's greater id).
 */
export function subscriptionEventApplies(
  event: EventPosition,
  ends: boolean,
  order: SubscriptionOrder | undefined,
): boolean {
  if (order === undefined) return true;
  if (order.ended) return false;
  return isAfter(event, order) || (ends && event.at.getTime() === order.at.getTime());
}

/**
 * Whether a paid checkout for a subscription still grants its plan: not once the subscription
 * ended, nor after a subscription event of a later second was applied (a checkout retried days
 * later must not undo a plan change or cancellation made since). It does not move the order:
 * the subscription's own events decide it.
 */
export function checkoutEventApplies(event: EventPosition, order: SubscriptionOrder | undefined): boolean {
  return order === undefined || (!order.ended && event.at.getTime() >= order.at.getTime());
}
