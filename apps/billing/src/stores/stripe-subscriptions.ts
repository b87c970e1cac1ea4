import { type Kysely, sql } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';
import type { SubscriptionOrder } from '../domain/stripe-events.ts';

// Transaction-scoped advisory lock per Stripe subscription: its events are decided one at a time.
const ORDER_LOCK = sql`hashtext('relayplane.billing.stripe-subscription')`;

/**
 * Per Stripe subscription, the last event applied to it (`stripe_subscriptions`). Use on a
 * transaction: `lock` holds the subscription until it commits, so two replicas deciding two of
 * its events take turns and the second sees the first's.
 */
export class StripeSubscriptionStore {
  readonly #db: Kysely<BillingDatabase>;
  constructor(db: Kysely<BillingDatabase>) {
    this.#db = db;
  }

  /** Locks the subscription until the transaction ends; answers what was last applied to it. */
  async lock(subscriptionId: string): Promise<SubscriptionOrder | undefined> {
    await sql`select pg_advisory_xact_lock(${ORDER_LOCK}, hashtext(${subscriptionId}))`.execute(this.#db);
    const row = await this.#db
      .selectFrom('stripe_subscriptions')
      .select(['last_event_at', 'last_event_id', 'ended'])
      .where('subscription_id', '=', subscriptionId)
      .executeTakeFirst();
    return row && { at: row.last_event_at, eventId: row.last_event_id, ended: row.ended };
  }

  /** Records `order` as the subscription's last applied event (call under `lock`). */
  async set(subscriptionId: string, tenantId: string, order: SubscriptionOrder, now: Date): Promise<void> {
    const values = {
      tenant_id: tenantId,
      last_event_at: order.at,
      last_event_id: order.eventId,
      ended: order.ended,
      updated_at: now,
    };
    await this.#db
      .insertInto('stripe_subscriptions')
      .values({ subscription_id: subscriptionId, ...values })
      .onConflict((oc) => oc.column('subscription_id').doUpdateSet(values))
      .execute();
  }
}
