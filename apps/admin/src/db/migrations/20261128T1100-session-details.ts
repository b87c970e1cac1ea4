import type { Kysely } from 'kysely';

/**
 * Sessions a user controls (issue 17 item 3): where a session or CLI token came from, and
 * whether a browser holds it. `last_seen_at` (since the first migration, written by
 * Authenticate at most once a minute) is what the API answers as `last_used_at`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('sessions')
    // The client address and user agent of the request that created it (login or device-code
    // exchange), as the gateway saw them; null when unknown (rows from before this migration).
    .addColumn('ip', 'text')
    .addColumn('user_agent', 'text')
    // Set once the session cookie authenticated this login session: it lives in a browser.
    .addColumn('browser', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();

  await db.schema
    .alterTable('device_grants')
    // Where the device asked from (StartDeviceAuthorization's client), for the approval page.
    .addColumn('requested_ip', 'text')
    .addColumn('requested_user_agent', 'text')
    .execute();
  // The user's sessions, newest first (ListSessions).
  await db.schema
    .createIndex('sessions_user_id_created_at_idx')
    .on('sessions')
    .columns(['user_id', 'created_at'])
    .execute();
  await db.schema.dropIndex('sessions_user_id_idx').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('sessions_user_id_idx').on('sessions').columns(['user_id']).execute();
  await db.schema.dropIndex('sessions_user_id_created_at_idx').execute();
  await db.schema
    .alterTable('device_grants')
    .dropColumn('requested_ip')
    .dropColumn('requested_user_agent')
    .execute();
  await db.schema
    .alterTable('sessions')
    .dropColumn('ip')
    .dropColumn('user_agent')
    .dropColumn('browser')
    .execute();
}
