import { type Kysely, sql } from 'kysely';

/**
 * The relay listing's order (`RelayStore.listLivePage`): live relays by (created_at, id), so a
 * page after a cursor is one range scan of `limit` rows however many relays are registered.
 * Partial on `deleted_at is null`: removed relays (kept for the audit trail) are never read.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('relays_live_order')
    .on('relays')
    .columns(['created_at', 'id'])
    .where(sql.ref('deleted_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('relays_live_order').execute();
}
