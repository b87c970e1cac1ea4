import { type Kysely, sql } from 'kysely';

/**
 * Webhook notices (issue 34, docs/webhooks.md):
 * - `cap_notices`: when a tenant's last `cap.reached` was written, so the event is edge-triggered
 *   at most once a minute per tenant across every issuer replica;
 * - an index for the sweep that ends sessions whose grant lapsed without an end.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('cap_notices')
    .addColumn('tenant_id', 'text', (c) => c.primaryKey())
    .addColumn('noticed_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('relay_sessions_unended_expiry')
    .on('relay_sessions')
    .column('grant_expires_at')
    .where(sql.ref('ended_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('relay_sessions_unended_expiry').execute();
  await db.schema.dropTable('cap_notices').execute();
}
