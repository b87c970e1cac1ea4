import { describe, expect, it } from 'vitest';
import {
  checkoutEventApplies,
  isAfter,
  paymentGrants,
  type SubscriptionOrder,
  subscriptionEventApplies,
} from './stripe-events.ts';

const at = (seconds: number) => new Date(seconds * 1000);

describe('which Stripe events may change a plan', () => {
  it('grants a checkout only when paid or needing no payment', () => {
    expect(paymentGrants('paid')).toBe(true);
    expect(paymentGrants('no_payment_required')).toBe(true);
    expect(paymentGrants('unpaid')).toBe(false);
    expect(paymentGrants(undefined)).toBe(false);
    expect(paymentGrants('')).toBe(false);
    expect(paymentGrants(['paid'])).toBe(false);
  });

  it('orders events by created, then by id within the same second', () => {
    const last = { at: at(100), eventId: 'evt_m' };
    expect(isAfter({ at: at(101), eventId: 'evt_a' }, last)).toBe(true);
    expect(isAfter({ at: at(99), eventId: 'evt_z' }, last)).toBe(false);
    expect(isAfter({ at: at(100), eventId: 'evt_n' }, last)).toBe(true);
    expect(isAfter({ at: at(100), eventId: 'evt_l' }, last)).toBe(false);
    expect(isAfter({ at: at(100), eventId: 'evt_m' }, last)).toBe(false);
  });

  it('applies a subscription event only after the last applied one, and none once the subscription ended', () => {
    const open: SubscriptionOrder = { at: at(100), eventId: 'evt_m', ended: false };
    expect(subscriptionEventApplies({ at: at(1), eventId: 'evt_a' }, false, undefined)).toBe(true);
    expect(subscriptionEventApplies({ at: at(101), eventId: 'evt_a' }, false, open)).toBe(true);
    expect(subscriptionEventApplies({ at: at(99), eventId: 'evt_z' }, false, open)).toBe(false);
    expect(subscriptionEventApplies({ at: at(100), eventId: 'evt_a' }, false, open)).toBe(false);
    const ended: SubscriptionOrder = { ...open, ended: true };
    expect(subscriptionEventApplies({ at: at(500), eventId: 'evt_z' }, false, ended)).toBe(false);
    expect(subscriptionEventApplies({ at: at(500), eventId: 'evt_z' }, true, ended)).toBe(false);
  });

  it('lets an event that ends the subscription win a tie of seconds, never an older second', () => {
    const open: SubscriptionOrder = { at: at(100), eventId: 'evt_m', ended: false };
    expect(subscriptionEventApplies({ at: at(100), eventId: 'evt_a' }, true, open)).toBe(true);
    expect(subscriptionEventApplies({ at: at(99), eventId: 'evt_z' }, true, open)).toBe(false);
  });

  it('lets a paid checkout grant unless its subscription ended or moved on in a later second', () => {
    const order: SubscriptionOrder = { at: at(100), eventId: 'evt_m', ended: false };
    expect(checkoutEventApplies({ at: at(100), eventId: 'evt_a' }, undefined)).toBe(true);
    // The same second as the subscription's own event (Stripe sends them together): still granted.
    expect(checkoutEventApplies({ at: at(100), eventId: 'evt_a' }, order)).toBe(true);
    expect(checkoutEventApplies({ at: at(99), eventId: 'evt_z' }, order)).toBe(false);
    expect(checkoutEventApplies({ at: at(200), eventId: 'evt_z' }, { ...order, ended: true })).toBe(false);
  });
});
