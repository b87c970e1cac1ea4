import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import { BUS_CHANNELS } from '@relayplane/shared/contract';
import type { Logger } from '@relayplane/shared/logger';
import type { Kysely } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';
import type { CheckoutSession } from '../domain/checkout.ts';
import { CheckoutSessionStore } from './checkout-sessions.ts';
import { type Subscription, SubscriptionStore } from './subscriptions.ts';

/**
 * Every plan change goes through here: stored, then announced (payload: the tenant id), so
 * gateways drop their cached entitlements for the tenant at once (they also refresh on a
 * timer, so a lost announcement delays, never breaks).
 */
export class PlanChanges {
  readonly #db: Kysely<BillingDatabase>;
  readonly #bus: Bus;
  readonly #clock: Clock;
  readonly #logger: Logger;

  constructor(deps: { db: Kysely<BillingDatabase>; bus: Bus; clock: Clock; logger: Logger }) {
    this.#db = deps.db;
    this.#bus = deps.bus;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  async set(tenantId: string, planId: string): Promise<Subscription> {
    const sub = await new SubscriptionStore(this.#db).setPlan(tenantId, planId, this.#clock.now());
    await this.announce(tenantId);
    return sub;
  }

  /** Stores a change inside a transaction the caller commits; announce after the commit. */
  async setIn(trx: Kysely<BillingDatabase>, tenantId: string, planId: string): Promise<Subscription> {
    return new SubscriptionStore(trx).setPlan(tenantId, planId, this.#clock.now());
  }

  /**
   * Completes an open checkout session and moves its tenant to the session's plan, in one
   * transaction, then announces the change. Undefined when the session was not open (another
   * call completed it first).
   */
  async completeCheckout(
    sessionId: string,
  ): Promise<{ session: CheckoutSession; subscription: Subscription } | undefined> {
    const result = await this.#db.transaction().execute(async (trx) => {
      const completed = await new CheckoutSessionStore(trx).complete(sessionId, this.#clock.now());
      if (!completed) return undefined;
      const subscription = await this.setIn(trx, completed.tenantId, completed.planId);
      return { session: completed, subscription };
    });
    if (result) await this.announce(result.session.tenantId);
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
