/**
 * Stripe webhooks: verified with the SDK (HMAC-SHA256 over "<t>.<payload>", the signed
 * timestamp within the tolerance), applied once per event id, the event recorded and the change
 * applied in one transaction, then announced.
 *
 * What a verified event may change (src/domain/stripe-events.ts): a checkout grants its plan
 * only once paid (`payment_status` `paid` / `no_payment_required`); the subscription events that
 * decide a plan are applied only when newer than the last one applied for that subscription
 * (`stripe_subscriptions`, under a per-subscription lock), and none once it ended. An event that
 * is not applied for those reasons is still recorded (so its retries are replays) and answered
 * like any other: Stripe retries anything but a 2xx for days. A replay of a recorded event id
 * answers 2xx too (`duplicate`), changing nothing.
 *
 * Every delivery is a `billing.webhook` audit event (details: the event id and type; never
 * the payload or the signature): a verified one in the transaction that records it (with its
 * `plan.change` and `checkout.confirm` when it changes a plan; outcome denied with a `reason` —
 * `not_paid`, `stale` — when a rule kept it from applying), a replay on its own (denied, reason
 * `replay`), a bad signature on its own with outcome failure. An event that cannot be recorded
 * answers unavailable, so Stripe delivers it again.
 */

import { DEFAULT_PLAN, isPlanId, type PlanId } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { currentRequestContext } from '@relayplane/shared/request-context';
import type { Kysely } from 'kysely';
import type Stripe from 'stripe';
import type { BillingDatabase } from '../db/schema.ts';
import type { Plan } from '../domain/plans.ts';
import {
  checkoutEventApplies,
  type EventPosition,
  paymentGrants,
  subscriptionEventApplies,
} from '../domain/stripe-events.ts';
import { CheckoutSessionStore } from '../stores/checkout-sessions.ts';
import type { PlanChanges } from '../stores/plan-changes.ts';
import { StripeSubscriptionStore } from '../stores/stripe-subscriptions.ts';
import { SubscriptionStore } from '../stores/subscriptions.ts';
import { WebhookEventStore } from '../stores/webhook-events.ts';
import { BAD_SIGNATURE_WINDOW_MS, type BadSignatures } from './bad-signatures.ts';

/** Subscription statuses that keep the paid plan; the ones that end it fall back to the default plan. */
const ACTIVE_STATUSES = new Set(['active', 'trialing', 'past_due']);
const ENDED_STATUSES = new Set(['canceled', 'unpaid', 'incomplete_expired']);
/** Statuses Stripe never moves a subscription out of: nothing later is applied to it. */
const FINAL_STATUSES = new Set(['canceled', 'incomplete_expired']);

/** Why a verified event changed nothing (`details.reason` of its `billing.webhook`, outcome denied). */
type NotAppliedReason = 'not_paid' | 'stale' | 'replay';

interface PlanChange {
  tenantId: string;
  planId: PlanId;
  /** Our checkout session to mark completed, by id or by Stripe's session id. */
  checkout?: { id?: string; reference: string };
  /** The tenant's Stripe customer (`customer` of the session or subscription), for metered usage. */
  customerId?: string;
}

/** What a verified event asks for, before its order is checked. */
interface Assessed {
  change?: PlanChange;
  /** The tenant the event names (audit), when it names a valid one. */
  tenantId?: string;
  /** Set when the event is refused whatever its order (a checkout not paid for). */
  refused?: NotAppliedReason;
  /** Details of the audit event beyond id and type (never the payload). */
  details?: Record<string, string>;
  /** The subscription the event is ordered in, and how. */
  subscription?: { id: string; kind: 'subscription' | 'checkout'; ends: boolean };
}

/** Stripe customer ids (cus_…); anything else in `customer` is ignored. */
const CUSTOMER_ID = /^cus_[A-Za-z0-9]{1,250}$/;
/** Stripe subscription ids (sub_…). */
const SUBSCRIPTION_ID = /^sub_[A-Za-z0-9_]{1,250}$/;

/** The id of a field that holds an id, an expanded object or null, when it matches `pattern`. */
function idOf(field: unknown, pattern: RegExp): string | undefined {
  const id =
    typeof field === 'string'
      ? field
      : typeof field === 'object' && field !== null && 'id' in field
        ? (field as { id: unknown }).id
        : undefined;
  return typeof id === 'string' && pattern.test(id) ? id : undefined;
}

export class StripeWebhooks {
  readonly #stripe: Stripe;
  readonly #secret: string;
  readonly #toleranceSeconds: number;
  readonly #db: Kysely<BillingDatabase>;
  readonly #plans: Record<PlanId, Plan>;
  readonly #planChanges: PlanChanges;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #audit: AuditRecorder;
  readonly #badSignatures: BadSignatures;

  constructor(deps: {
    stripe: Stripe;
    secret: string;
    toleranceSeconds: number;
    db: Kysely<BillingDatabase>;
    plans: Record<PlanId, Plan>;
    planChanges: PlanChanges;
    clock: Clock;
    logger: Logger;
    audit: AuditRecorder;
    /** Bad signatures counted per client and window (providers/bad-signatures.ts). */
    badSignatures: BadSignatures;
  }) {
    this.#audit = deps.audit;
    this.#badSignatures = deps.badSignatures;
    this.#stripe = deps.stripe;
    this.#secret = deps.secret;
    this.#toleranceSeconds = deps.toleranceSeconds;
    this.#db = deps.db;
    this.#plans = deps.plans;
    this.#planChanges = deps.planChanges;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  /**
   * Verifies, records and applies one delivery; answers the event id, and `duplicate` for an
   * event id recorded before (nothing changed).
   */
  async handle(payload: Uint8Array, signature: string): Promise<{ eventId: string; duplicate: boolean }> {
    let event: Stripe.Event;
    try {
      event = this.#verify(payload, signature);
    } catch (err) {
      await this.#refusedSignature((err as Error).message);
      throw err;
    }
    const assessed = this.#assess(event);
    const position: EventPosition = { at: new Date(event.created * 1000), eventId: event.id };
    const now = this.#clock.now();
    const outcome = await this.#db.transaction().execute(async (trx: Kysely<BillingDatabase>) => {
      if (!(await new WebhookEventStore(trx).record('stripe', event.id, event.type, now))) {
        return { reason: 'replay' as const, applied: false };
      }
      let reason = assessed.refused;
      const change = assessed.change;
      if (!reason && change && assessed.subscription) {
        const { id, kind, ends } = assessed.subscription;
        const orders = new StripeSubscriptionStore(trx);
        const order = await orders.lock(id);
        if (kind === 'checkout') {
          if (!checkoutEventApplies(position, order)) reason = 'stale';
        } else if (subscriptionEventApplies(position, ends, order)) {
          await orders.set(id, change.tenantId, { ...position, ended: ends }, now);
        } else {
          reason = 'stale';
        }
      }
      const applied = change !== undefined && reason === undefined;
      await this.#audit.enqueue(trx, {
        action: 'billing.webhook',
        tenantId: assessed.tenantId ?? null,
        target: { type: 'stripe_event', id: event.id },
        ...(reason ? { outcome: 'denied' as const } : {}),
        details: {
          provider: 'stripe',
          event_id: event.id,
          type: event.type,
          applied,
          ...(reason ? { reason } : {}),
          ...assessed.details,
        },
      });
      if (applied && change) await this.#apply(trx, event, change, now);
      return { reason, applied };
    });
    if (outcome.reason === 'replay') {
      await this.#alone({
        outcome: 'denied',
        tenantId: assessed.tenantId,
        details: { event_id: event.id, type: event.type, applied: false, reason: 'replay' },
      });
      this.#logger.info(
        { eventId: event.id, type: event.type },
        'stripe webhook replayed: already recorded, nothing changed',
      );
      return { eventId: event.id, duplicate: true };
    }
    this.#audit.kick();
    if (outcome.applied && assessed.change) await this.#planChanges.announce(assessed.change.tenantId);
    this.#logger.info(
      {
        eventId: event.id,
        type: event.type,
        tenantId: assessed.tenantId,
        planId: assessed.change?.planId,
        reason: outcome.reason,
      },
      outcome.applied
        ? 'stripe webhook applied'
        : outcome.reason
          ? `stripe webhook recorded, not applied (${outcome.reason})`
          : 'stripe webhook recorded (no plan change)',
    );
    return { eventId: event.id, duplicate: false };
  }

  /** Stores the plan change (with its events) inside the transaction that recorded the event. */
  async #apply(
    trx: Kysely<BillingDatabase>,
    event: Stripe.Event,
    change: PlanChange,
    now: Date,
  ): Promise<void> {
    await this.#planChanges.setIn(trx, change.tenantId, change.planId, 'stripe_webhook');
    if (change.customerId) {
      await new SubscriptionStore(trx).setStripeCustomer(change.tenantId, change.customerId);
    }
    if (change.checkout) {
      const sessions = new CheckoutSessionStore(trx);
      const ours =
        (change.checkout.id ? await sessions.get(change.checkout.id) : undefined) ??
        (await sessions.byProviderReference('stripe', change.checkout.reference));
      if (ours && ours.tenantId === change.tenantId && (await sessions.complete(ours.id, now))) {
        await this.#audit.enqueue(trx, {
          action: 'checkout.confirm',
          tenantId: change.tenantId,
          target: { type: 'checkout_session', id: ours.id },
          details: { plan_id: change.planId, provider: 'stripe', event_id: event.id },
        });
      }
    }
  }

  /**
   * A delivery whose signature does not verify changed nothing and proves nothing about who sent
   * it; recording each on its own would let anyone fill the platform's chain and outbox (issue 31).
   * Like refused logins, they are aggregated per client (the gateway's client IP, an IPv6 /64)
   * and window (BAD_SIGNATURE_WINDOW_MS): the first of each window is recorded, carrying how many
   * the same client sent in the window before (`refused_previous_window`); every one is logged
   * at debug and counted (relayplane_billing_webhook_bad_signatures_total).
   */
  async #refusedSignature(reason: string): Promise<void> {
    const counted = await this.#badSignatures.count(currentRequestContext()?.clientIp ?? '');
    this.#logger.debug(
      { client: counted.client, inWindow: counted.inWindow },
      'stripe webhook with a bad signature refused',
    );
    if (!counted.first) return;
    await this.#alone({
      outcome: 'failure',
      details: {
        reason,
        client: counted.first.client,
        window_seconds: BAD_SIGNATURE_WINDOW_MS / 1000,
        refused_previous_window: counted.first.refusedPreviousWindow,
      },
    });
  }

  /** A `billing.webhook` event of a delivery that changed nothing, recorded on its own. */
  async #alone(event: {
    outcome: 'failure' | 'denied';
    tenantId?: string | undefined;
    details: {
      reason: string;
      event_id?: string;
      type?: string;
      applied?: boolean;
      client?: string;
      window_seconds?: number;
      refused_previous_window?: number;
    };
  }): Promise<void> {
    await this.#audit.enqueue(this.#db, {
      action: 'billing.webhook',
      tenantId: event.tenantId ?? null,
      outcome: event.outcome,
      target: { type: 'stripe_event', id: event.details.event_id ?? '' },
      details: { provider: 'stripe', ...event.details },
    });
    this.#audit.kick();
  }

  #verify(payload: Uint8Array, signature: string): Stripe.Event {
    const nowMs = this.#clock.now().getTime();
    let event: Stripe.Event;
    try {
      event = this.#stripe.webhooks.constructEvent(
        Buffer.from(payload),
        signature,
        this.#secret,
        this.#toleranceSeconds,
        undefined,
        nowMs,
      );
    } catch (err) {
      const reason = (err as Error).message?.includes('tolerance')
        ? 'its timestamp is outside the tolerance'
        : 'the signature does not match';
      throw new AppError('invalid_request', `webhook signature verification failed: ${reason}`, {
        cause: err,
      });
    }
    // The SDK refuses old timestamps only; one from the future is as suspect.
    const signedAt = Number(/(?:^|,)t=(\d+)/.exec(signature)?.[1] ?? Number.NaN);
    if (!(signedAt * 1000 <= nowMs + this.#toleranceSeconds * 1000)) {
      throw new AppError(
        'invalid_request',
        'webhook signature verification failed: its timestamp is outside the tolerance',
      );
    }
    // `created` orders subscription events: every Stripe event carries it (Unix seconds).
    if (
      typeof event.id !== 'string' ||
      event.id === '' ||
      typeof event.type !== 'string' ||
      !Number.isSafeInteger(event.created) ||
      event.created < 0
    ) {
      throw new AppError('invalid_request', 'webhook payload is not a Stripe event');
    }
    return event;
  }

  /** What the event asks for; no `change`: recorded, nothing to apply. */
  #assess(event: Stripe.Event): Assessed {
    switch (event.type) {
      case 'checkout.session.completed':
      // A delayed payment method: `completed` came unpaid, this one says the money arrived.
      case 'checkout.session.async_payment_succeeded': {
        const s = event.data.object;
        const tenantId = s.metadata?.tenant_id ?? s.client_reference_id ?? '';
        const planId = s.metadata?.plan_id ?? '';
        if (!this.#valid(event, tenantId, planId)) return {};
        if (!paymentGrants(s.payment_status)) {
          this.#logger.warn(
            { eventId: event.id, type: event.type, tenantId, paymentStatus: s.payment_status },
            'stripe checkout session is not paid; the plan is not granted',
          );
          return {
            tenantId,
            refused: 'not_paid',
            details: { payment_status: typeof s.payment_status === 'string' ? s.payment_status : '' },
          };
        }
        const subscriptionId = idOf(s.subscription, SUBSCRIPTION_ID);
        return {
          tenantId,
          change: {
            tenantId,
            planId: planId as PlanId,
            checkout: { id: s.metadata?.checkout_session_id, reference: s.id },
            customerId: idOf(s.customer, CUSTOMER_ID),
          },
          ...(subscriptionId ? { subscription: { id: subscriptionId, kind: 'checkout', ends: false } } : {}),
        };
      }
      case 'customer.subscription.updated': {
        const sub = event.data.object;
        const tenantId = sub.metadata?.tenant_id ?? '';
        const customerId = idOf(sub.customer, CUSTOMER_ID);
        let planId: string;
        if (ENDED_STATUSES.has(sub.status)) {
          planId = DEFAULT_PLAN;
        } else if (ACTIVE_STATUSES.has(sub.status)) {
          const priceId = sub.items?.data?.[0]?.price?.id;
          const byPrice = Object.values(this.#plans).find(
            (p) => p.stripePriceId && p.stripePriceId === priceId,
          );
          planId = byPrice?.id ?? sub.metadata?.plan_id ?? '';
        } else {
          // incomplete, paused: decides nothing, so it neither applies nor moves the order.
          return isId('tenant', tenantId) ? { tenantId } : {};
        }
        return this.#subscriptionChange(
          event,
          sub.id,
          tenantId,
          planId,
          customerId,
          FINAL_STATUSES.has(sub.status),
        );
      }
      case 'customer.subscription.deleted': {
        const sub = event.data.object;
        return this.#subscriptionChange(
          event,
          sub.id,
          sub.metadata?.tenant_id ?? '',
          DEFAULT_PLAN,
          idOf(sub.customer, CUSTOMER_ID),
          true,
        );
      }
      default:
        return {};
    }
  }

  #subscriptionChange(
    event: Stripe.Event,
    rawId: unknown,
    tenantId: string,
    planId: string,
    customerId: string | undefined,
    ends: boolean,
  ): Assessed {
    if (!this.#valid(event, tenantId, planId)) return {};
    const id = idOf(rawId, SUBSCRIPTION_ID);
    if (!id) {
      this.#logger.warn(
        { eventId: event.id, type: event.type, tenantId },
        'stripe subscription event names no subscription id; recorded without a change',
      );
      return { tenantId };
    }
    return {
      tenantId,
      change: { tenantId, planId: planId as PlanId, customerId },
      subscription: { id, kind: 'subscription', ends },
    };
  }

  #valid(event: Stripe.Event, tenantId: string, planId: string): boolean {
    if (isId('tenant', tenantId) && isPlanId(planId)) return true;
    this.#logger.warn(
      { eventId: event.id, type: event.type, tenantId, planId },
      'stripe event names no known tenant and plan; recorded without a change',
    );
    return false;
  }
}
