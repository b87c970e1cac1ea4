import type { Kysely } from 'kysely';

/**
 * Relay-session usage per day (docs/credentials.md, "Sessions"): the sessions that ended that
 * day, their seconds in all (as the relays reported) and the bytes they sent and received, as
 * the issuer summarizes them. Rows from before are 0.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('usage_daily')
    .addColumn('sessions_ended', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('session_seconds', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_sent', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_received', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('usage_daily')
    .dropColumn('sessions_ended')
    .dropColumn('session_seconds')
    .dropColumn('bytes_sent')
    .dropColumn('bytes_received')
    .execute();
}
