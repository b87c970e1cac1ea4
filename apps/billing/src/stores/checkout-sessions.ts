import type { Kysely, Selectable } from 'kysely';
import type { BillingDatabase, CheckoutSessionsTable } from '../db/schema.ts';
import type { CheckoutSession } from '../domain/checkout.ts';

function fromRow(row: Selectable<CheckoutSessionsTable>): CheckoutSession {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    planId: row.plan_id,
    provider: row.provider,
    status: row.status,
    url: row.url,
    providerReference: row.provider_reference,
    idempotencyKey: row.idempotency_key,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    completedAt: row.completed_at,
  };
}

/** Checkout sessions in PostgreSQL. Works on a transaction too (pass it as `db`). */
export class CheckoutSessionStore {
  readonly #db: Kysely<BillingDatabase>;
  constructor(db: Kysely<BillingDatabase>) {
    this.#db = db;
  }

  /** Inserts `session`; answers false when the tenant already used its idempotency key. */
  async insert(session: CheckoutSession): Promise<boolean> {
    const row = await this.#db
      .insertInto('checkout_sessions')
      .values({
        id: session.id,
        tenant_id: session.tenantId,
        plan_id: session.planId,
        provider: session.provider,
        status: session.status,
        url: session.url,
        provider_reference: session.providerReference,
        idempotency_key: session.idempotencyKey,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        completed_at: session.completedAt,
      })
      .onConflict((oc) => oc.columns(['tenant_id', 'idempotency_key']).doNothing())
      .returning('id')
      .executeTakeFirst();
    return row !== undefined;
  }

  async get(id: string): Promise<CheckoutSession | undefined> {
    const row = await this.#db
      .selectFrom('checkout_sessions')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && fromRow(row);
  }

  async byIdempotencyKey(tenantId: string, key: string): Promise<CheckoutSession | undefined> {
    const row = await this.#db
      .selectFrom('checkout_sessions')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('idempotency_key', '=', key)
      .executeTakeFirst();
    return row && fromRow(row);
  }

  async byProviderReference(provider: string, reference: string): Promise<CheckoutSession | undefined> {
    const row = await this.#db
      .selectFrom('checkout_sessions')
      .selectAll()
      .where('provider', '=', provider)
      .where('provider_reference', '=', reference)
      .executeTakeFirst();
    return row && fromRow(row);
  }

  /** Records where the provider's page is, once its call succeeded. */
  /**
   * The provider's answer: from now on callers see the session. `audit` (its `checkout.create`
   * event) runs in the same transaction: if it throws, the session stays unseen.
   */
  async setProviderResult(
    id: string,
    url: string,
    reference: string | null,
    audit?: (trx: Kysely<BillingDatabase>) => Promise<unknown>,
  ): Promise<void> {
    await this.#db.transaction().execute(async (trx: Kysely<BillingDatabase>) => {
      await trx
        .updateTable('checkout_sessions')
        .set({ url, provider_reference: reference })
        .where('id', '=', id)
        .execute();
      await audit?.(trx);
    });
  }

  /** Forgets a session whose provider call failed, so the same idempotency key can try again. */
  async delete(id: string): Promise<void> {
    await this.#db.deleteFrom('checkout_sessions').where('id', '=', id).execute();
  }

  /** open → completed; answers the session when this call completed it, undefined otherwise. */
  async complete(id: string, now: Date): Promise<CheckoutSession | undefined> {
    const row = await this.#db
      .updateTable('checkout_sessions')
      .set({ status: 'completed', completed_at: now })
      .where('id', '=', id)
      .where('status', '=', 'open')
      .returningAll()
      .executeTakeFirst();
    return row && fromRow(row);
  }

  /** open → expired. */
  async expire(id: string): Promise<void> {
    await this.#db
      .updateTable('checkout_sessions')
      .set({ status: 'expired' })
      .where('id', '=', id)
      .where('status', '=', 'open')
      .execute();
  }
}
