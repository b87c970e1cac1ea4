/**
 * Stripe webhooks: verified with the SDK (HMAC-SHA256 over "<t>.<payload>", the signed
 * timestamp within the tolerance), applied once per event id (replays answer
 * invalid_request and change nothing), the event recorded and the change applied in one
 * transaction, then announced.
 *
 * Every delivery is a `billing.webhook` audit event (details: the event id and type; never
 * the payload or the signature): a verified one in the transaction that records it (with its
 * `plan.change` and `checkout.confirm` when it changes a plan), a refused one (bad signature,
 * replay) on its own with outcome failure. An event that cannot be recorded answers
 * unavailable, so Stripe delivers it again.
 */
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Clock } from '@relayplane/shared/clock';
import { DEFAULT_PLAN, isPlanId, type PlanId } from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { Logger } from '@relayplane/shared/logger';
import type { Kysely } from 'kysely';
import type Stripe from 'stripe';
import type { BillingDatabase } from '../db/schema.ts';
import type { Plan } from '../domain/plans.ts';
import { CheckoutSessionStore } from '../stores/checkout-sessions.ts';
import type { PlanChanges } from '../stores/plan-changes.ts';
import { SubscriptionStore } from '../stores/subscriptions.ts';
import { WebhookEventStore } from '../stores/webhook-events.ts';

const REPLAYED_EVENT_MESSAGE = 'webhook event already processed';

/** Subscription statuses that keep the paid plan; the ones that end it fall back to the default plan. */
const ACTIVE_STATUSES = new Set(['active', 'trialing', 'past_due']);
const ENDED_STATUSES = new Set(['canceled', 'unpaid', 'incomplete_expired']);

interface PlanChange {
  tenantId: string;
  planId: PlanId;
  /** Our checkout session to mark completed, by id or by Stripe's session id. */
  checkout?: { id?: string; reference: string };
  /** The tenant's Stripe customer (`customer` of the session or subscription), for metered usage. */
  customerId?: string;
}

/** Stripe customer ids (cus_…); anything else in `customer` is ignored. */
const CUSTOMER_ID = /^cus_[A-Za-z0-9]{1,250}$/;

/** The customer id of a `customer` field (an id, an expanded object or null); undefined if none. */
function customerIdOf(customer: unknown): string | undefined {
  const id =
    typeof customer === 'string'
      ? customer
      : typeof customer === 'object' && customer !== null && 'id' in customer
        ? (customer as { id: unknown }).id
        : undefined;
  return typeof id === 'string' && CUSTOMER_ID.test(id) ? id : undefined;
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
  }) {
    this.#audit = deps.audit;
    this.#stripe = deps.stripe;
    this.#secret = deps.secret;
    this.#toleranceSeconds = deps.toleranceSeconds;
    this.#db = deps.db;
    this.#plans = deps.plans;
    this.#planChanges = deps.planChanges;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  /** Verifies, records and applies one delivery; answers the event id. */
  async handle(payload: Uint8Array, signature: string): Promise<{ eventId: string }> {
    let event: Stripe.Event;
    try {
      event = this.#verify(payload, signature);
    } catch (err) {
      await this.#refused({ reason: (err as Error).message });
      throw err;
    }
    const change = this.#changeOf(event);
    const now = this.#clock.now();
    const replayed = await this.#db.transaction().execute(async (trx: Kysely<BillingDatabase>) => {
      if (!(await new WebhookEventStore(trx).record('stripe', event.id, event.type, now))) return true;
      await this.#audit.enqueue(trx, {
        action: 'billing.webhook',
        tenantId: change?.tenantId ?? null,
        target: { type: 'stripe_event', id: event.id },
        details: { provider: 'stripe', event_id: event.id, type: event.type, applied: change !== undefined },
      });
      if (!change) return false;
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
      return false;
    });
    if (replayed) {
      await this.#refused({ event_id: event.id, type: event.type, reason: REPLAYED_EVENT_MESSAGE });
      throw new AppError('invalid_request', REPLAYED_EVENT_MESSAGE);
    }
    this.#audit.kick();
    if (change) await this.#planChanges.announce(change.tenantId);
    this.#logger.info(
      { eventId: event.id, type: event.type, tenantId: change?.tenantId, planId: change?.planId },
      change ? 'stripe webhook applied' : 'stripe webhook recorded (no plan change)',
    );
    return { eventId: event.id };
  }

  /** A refused delivery's `billing.webhook` event (outcome failure), recorded on its own. */
  async #refused(details: { reason: string; event_id?: string; type?: string }): Promise<void> {
    await this.#audit.enqueue(this.#db, {
      action: 'billing.webhook',
      tenantId: null,
      outcome: 'failure',
      target: { type: 'stripe_event', id: details.event_id ?? '' },
      details: { provider: 'stripe', ...details },
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
    if (typeof event.id !== 'string' || event.id === '' || typeof event.type !== 'string') {
      throw new AppError('invalid_request', 'webhook payload is not a Stripe event');
    }
    return event;
  }

  /** What the event changes; undefined: recorded, nothing to apply. */
  #changeOf(event: Stripe.Event): PlanChange | undefined {
    switch (event.type) {
      case 'checkout.session.completed': {
        const s = event.data.object;
        const tenantId = s.metadata?.tenant_id ?? s.client_reference_id ?? '';
        const planId = s.metadata?.plan_id ?? '';
        if (!this.#valid(event, tenantId, planId)) return undefined;
        return {
          tenantId,
          planId: planId as PlanId,
          checkout: { id: s.metadata?.checkout_session_id, reference: s.id },
          customerId: customerIdOf(s.customer),
        };
      }
      case 'customer.subscription.updated': {
        const sub = event.data.object;
        const tenantId = sub.metadata?.tenant_id ?? '';
        const customerId = customerIdOf(sub.customer);
        if (ENDED_STATUSES.has(sub.status)) {
          return this.#valid(event, tenantId, DEFAULT_PLAN)
            ? { tenantId, planId: DEFAULT_PLAN, customerId }
            : undefined;
        }
        if (!ACTIVE_STATUSES.has(sub.status)) return undefined;
        const priceId = sub.items?.data?.[0]?.price?.id;
        const byPrice = Object.values(this.#plans).find(
          (p) => p.stripePriceId && p.stripePriceId === priceId,
        );
        const planId = byPrice?.id ?? sub.metadata?.plan_id ?? '';
        return this.#valid(event, tenantId, planId)
          ? { tenantId, planId: planId as PlanId, customerId }
          : undefined;
      }
      case 'customer.subscription.deleted': {
        const sub = event.data.object;
        const tenantId = sub.metadata?.tenant_id ?? '';
        return this.#valid(event, tenantId, DEFAULT_PLAN)
          ? { tenantId, planId: DEFAULT_PLAN, customerId: customerIdOf(sub.customer) }
          : undefined;
      }
      default:
        return undefined;
    }
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
