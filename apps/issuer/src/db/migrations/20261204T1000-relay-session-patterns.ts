import { type Kysely, sql } from 'kysely';

/**
 * Path-scoped credentials (issue 33): a session's grant holds the moq patterns its credential
 * allows at the dialed path, not only whether it may publish or subscribe. Rows from before hold
 * `**` for each role they were granted; the two booleans stay, written as "any pattern", for an
 * issuer of the previous release during a rolling upgrade.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('relay_sessions')
    .addColumn('grant_publish_patterns', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('grant_subscribe_patterns', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .execute();
  // Through the query builder, so the table is the issuer schema's (raw SQL would not be).
  await (db as Kysely<{ relay_sessions: Record<string, unknown> }>)
    .updateTable('relay_sessions')
    .set({
      grant_publish_patterns: sql`CASE WHEN grant_publish THEN '{**}'::text[] ELSE '{}'::text[] END`,
      grant_subscribe_patterns: sql`CASE WHEN grant_subscribe THEN '{**}'::text[] ELSE '{}'::text[] END`,
    })
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('relay_sessions')
    .dropColumn('grant_publish_patterns')
    .dropColumn('grant_subscribe_patterns')
    .execute();
}
