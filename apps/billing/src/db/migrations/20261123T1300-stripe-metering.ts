import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The tenant's Stripe customer, stored from its checkout and subscription webhooks.
  await db.schema.alterTable('subscriptions').addColumn('stripe_customer_id', 'text').execute();
  // Completed UTC days reported to a Stripe meter: a (tenant, day) is sent once. A row is
  // inserted in the transaction that made the successful call (see src/providers/stripe-meter.ts).
  await db.schema
    .createTable('metered_usage_reports')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('event_name', 'text', (c) => c.notNull())
    .addColumn('stripe_customer_id', 'text', (c) => c.notNull())
    .addColumn('value', 'bigint', (c) => c.notNull())
    .addColumn('identifier', 'text', (c) => c.notNull())
    .addColumn('reported_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('metered_usage_reports_pkey', ['tenant_id', 'day'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('metered_usage_reports').execute();
  await db.schema.alterTable('subscriptions').dropColumn('stripe_customer_id').execute();
}
