import type { Kysely } from 'kysely';

/**
 * Per Stripe subscription, the last event applied to it, so a late or retried older event
 * changes nothing (see src/domain/stripe-events.ts). Written in the transaction that applies
 * the event, under a per-subscription advisory lock.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('stripe_subscriptions')
    .addColumn('subscription_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    // The applied event's `created` (Stripe's Unix seconds) and id (the tie-breaker within a second).
    .addColumn('last_event_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_event_id', 'text', (c) => c.notNull())
    // Deleted (or canceled): no later event is applied.
    .addColumn('ended', 'boolean', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('stripe_subscriptions').execute();
}
