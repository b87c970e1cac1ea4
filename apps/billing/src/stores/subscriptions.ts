import type { Kysely } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';

export interface Subscription {
  tenantId: string;
  planId: string;
  updatedAt: Date;
}

export class SubscriptionStore {
  readonly #db: Kysely<BillingDatabase>;
  constructor(db: Kysely<BillingDatabase>) {
    this.#db = db;
  }

  async get(tenantId: string): Promise<Subscription | undefined> {
    const row = await this.#db
      .selectFrom('subscriptions')
      .select(['tenant_id', 'plan_id', 'updated_at'])
      .where('tenant_id', '=', tenantId)
      .executeTakeFirst();
    return row && { tenantId: row.tenant_id, planId: row.plan_id, updatedAt: row.updated_at };
  }

  /** The subscriptions of those of `tenantIds` that have one, in no particular order. */
  async getMany(tenantIds: readonly string[]): Promise<Subscription[]> {
    if (tenantIds.length === 0) return [];
    const rows = await this.#db
      .selectFrom('subscriptions')
      .select(['tenant_id', 'plan_id', 'updated_at'])
      .where('tenant_id', 'in', tenantIds)
      .execute();
    return rows.map((row) => ({ tenantId: row.tenant_id, planId: row.plan_id, updatedAt: row.updated_at }));
  }

  /** `get` that also locks the row until the transaction ends (plan changes: a true `from`). */
  async getForUpdate(tenantId: string): Promise<Subscription | undefined> {
    const row = await this.#db
      .selectFrom('subscriptions')
      .select(['tenant_id', 'plan_id', 'updated_at'])
      .where('tenant_id', '=', tenantId)
      .forUpdate()
      .executeTakeFirst();
    return row && { tenantId: row.tenant_id, planId: row.plan_id, updatedAt: row.updated_at };
  }

  /** Records the tenant's Stripe customer (the subscription row exists: call after `setPlan`). */
  async setStripeCustomer(tenantId: string, customerId: string): Promise<void> {
    await this.#db
      .updateTable('subscriptions')
      .set({ stripe_customer_id: customerId })
      .where('tenant_id', '=', tenantId)
      .execute();
  }

  /** The plan and Stripe customer of a tenant (undefined: no subscription row). */
  async billingOf(
    tenantId: string,
  ): Promise<{ planId: string; stripeCustomerId: string | null } | undefined> {
    const row = await this.#db
      .selectFrom('subscriptions')
      .select(['plan_id', 'stripe_customer_id'])
      .where('tenant_id', '=', tenantId)
      .executeTakeFirst();
    return row && { planId: row.plan_id, stripeCustomerId: row.stripe_customer_id };
  }

  async setPlan(tenantId: string, planId: string, now: Date): Promise<Subscription> {
    const row = await this.#db
      .insertInto('subscriptions')
      .values({ tenant_id: tenantId, plan_id: planId, updated_at: now })
      .onConflict((oc) => oc.column('tenant_id').doUpdateSet({ plan_id: planId, updated_at: now }))
      .returning(['tenant_id', 'plan_id', 'updated_at'])
      .executeTakeFirstOrThrow();
    return { tenantId: row.tenant_id, planId: row.plan_id, updatedAt: row.updated_at };
  }
}
