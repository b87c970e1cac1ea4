import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('checkout_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('plan_id', 'text', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('open', 'completed', 'expired')`))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('provider_reference', 'text')
    .addColumn('idempotency_key', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('completed_at', 'timestamptz')
    .execute();
  // One session per tenant and Idempotency-Key (null keys never collide).
  await db.schema
    .createIndex('checkout_sessions_tenant_idempotency_key')
    .on('checkout_sessions')
    .columns(['tenant_id', 'idempotency_key'])
    .unique()
    .execute();
  await db.schema
    .createIndex('checkout_sessions_provider_reference')
    .on('checkout_sessions')
    .column('provider_reference')
    .execute();
  // Replay protection: an event id is applied once.
  await db.schema
    .createTable('webhook_events')
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_events_pkey', ['provider', 'event_id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('webhook_events').execute();
  await db.schema.dropTable('checkout_sessions').execute();
}
