import type { Kysely } from 'kysely';

/**
 * The operator's tenant list (`GET /admin/v1/tenants`) walks every tenant in (created_at, id)
 * order from a keyset cursor: this index makes a page a range scan of `limit + 1` rows rather
 * than a sort of every tenant.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('tenants_created_at_id_idx')
    .on('tenants')
    .columns(['created_at', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('tenants_created_at_id_idx').execute();
}
