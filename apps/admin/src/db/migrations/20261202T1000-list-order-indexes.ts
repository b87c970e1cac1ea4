import type { Kysely } from 'kysely';

/**
 * The paged lists (issue 18) walk each list in its order from a keyset cursor: one index per
 * list on (owner, order columns), so a page is an index range scan of `limit + 1` rows rather
 * than a sort of everything the owner has. Sessions grow with every login (until the sweep
 * removes the expired); the others with use. API keys, bot keys and identity tokens already
 * have theirs.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('sessions_user_id_created_at_id_idx')
    .on('sessions')
    .columns(['user_id', 'created_at', 'id'])
    .execute();
  await db.schema
    .createIndex('projects_tenant_id_created_at_id_idx')
    .on('projects')
    .columns(['tenant_id', 'created_at', 'id'])
    .execute();
  await db.schema
    .createIndex('memberships_tenant_id_created_at_idx')
    .on('memberships')
    .columns(['tenant_id', 'created_at'])
    .execute();
  await db.schema
    .createIndex('allowlist_entries_project_id_created_at_cidr_idx')
    .on('allowlist_entries')
    .columns(['project_id', 'created_at', 'cidr'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('allowlist_entries_project_id_created_at_cidr_idx').execute();
  await db.schema.dropIndex('memberships_tenant_id_created_at_idx').execute();
  await db.schema.dropIndex('projects_tenant_id_created_at_id_idx').execute();
  await db.schema.dropIndex('sessions_user_id_created_at_id_idx').execute();
}
