import { BUS_CHANNELS, DEFAULT_PLAN } from '@relayplane/contract/contract';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { Kysely } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';
import type { CheckoutSession } from '../domain/checkout.ts';
import { CheckoutSessionStore } from './checkout-sessions.ts';
import { type Subscription, SubscriptionStore } from './subscriptions.ts';

/** Why a tenant's plan changed: `details.cause` of its `plan.change` event. */
export type PlanChangeCause = 'set_plan' | 'checkout' | 'stripe_webhook';

/**
 * Every plan change goes through here: stored together with its `plan.change` audit event
 * (from, to, cause; in the same transaction, so a change that cannot be audited is not made),
 * then announced (payload: the tenant id), so gateways drop their cached entitlements for the
 * tenant at once (they also refresh on a timer, so a lost announcement delays, never breaks).
 * A "change" to the plan the tenant already has stores nothing new and records no event.
 */
export class PlanChanges {
  readonly #db: Kysely<BillingDatabase>;
  readonly #bus: Bus;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #audit: AuditRecorder;

  constructor(deps: {
    db: Kysely<BillingDatabase>;
    bus: Bus;
    clock: Clock;
    logger: Logger;
    audit: AuditRecorder;
  }) {
    this.#db = deps.db;
    this.#audit = deps.audit;
    this.#bus = deps.bus;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  /** SetPlan (a platform admin): stored with its event, then announced. */
  async set(tenantId: string, planId: string): Promise<Subscription> {
    const sub = await this.#db
      .transaction()
      .execute((trx: Kysely<BillingDatabase>) => this.setIn(trx, tenantId, planId, 'set_plan'));
    this.#audit.kick();
    await this.announce(tenantId);
    return sub;
  }

  /**
   * Stores a change and its `plan.change` event inside a transaction the caller commits;
   * kick the outbox and announce after the commit.
   */
  async setIn(
    trx: Kysely<BillingDatabase>,
    tenantId: string,
    planId: string,
    cause: PlanChangeCause,
  ): Promise<Subscription> {
    const store = new SubscriptionStore(trx);
    const from = (await store.getForUpdate(tenantId))?.planId ?? DEFAULT_PLAN;
    const sub = await store.setPlan(tenantId, planId, this.#clock.now());
    if (from !== planId) {
      await this.#audit.enqueue(trx, {
        action: 'plan.change',
        tenantId,
        target: { type: 'tenant', id: tenantId },
        details: { from, to: planId, cause },
      });
    }
    return sub;
  }

  /**
   * Completes an open checkout session and moves its tenant to the session's plan, in one
   * transaction, then announces the change. Undefined when the session was not open (another
   * call completed it first).
   */
  async completeCheckout(
    sessionId: string,
  ): Promise<{ session: CheckoutSession; subscription: Subscription } | undefined> {
    const result = await this.#db.transaction().execute(async (trx: Kysely<BillingDatabase>) => {
      const completed = await new CheckoutSessionStore(trx).complete(sessionId, this.#clock.now());
      if (!completed) return undefined;
      await this.#audit.enqueue(trx, {
        action: 'checkout.confirm',
        tenantId: completed.tenantId,
        target: { type: 'checkout_session', id: completed.id },
        details: { plan_id: completed.planId, provider: completed.provider },
      });
      const subscription = await this.setIn(trx, completed.tenantId, completed.planId, 'checkout');
      return { session: completed, subscription };
    });
    if (result) {
      this.#audit.kick();
      await this.announce(result.session.tenantId);
    }
    return result;
  }

  async announce(tenantId: string): Promise<void> {
    await this.#bus.publish(BUS_CHANNELS.plansChanged, tenantId).catch((err: unknown) => {
      this.#logger.warn(
        { err: { message: (err as Error).message }, tenantId },
        'could not announce the plan change; gateways pick it up when their cache expires',
      );
    });
    this.#logger.info({ tenantId }, 'plan changed');
  }
}
