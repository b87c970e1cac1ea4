import type { Kysely } from 'kysely';

/**
 * An API key's ceiling (issue 33; docs/credentials.md, "Path-scoped credentials"): the root and
 * moq patterns every credential the key mints is bounded by. Null: none. Fixed at creation.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('ceiling', 'jsonb').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('ceiling').execute();
}
