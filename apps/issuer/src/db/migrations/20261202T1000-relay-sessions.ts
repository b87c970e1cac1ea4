import { type Kysely, sql } from 'kysely';

/**
 * Relay sessions (docs/credentials.md, "Sessions"): one row per session a relay admitted through
 * `POST /v1/relays/auth`, the durable ledger behind live-session caps, revocation of live
 * sessions and session usage. `id` is the relay's session id (128-bit hex, random).
 *
 * The credential's facts a revalidation re-checks (`jti`, `kid`, `credential_iat`) are copied
 * here: credential rows are deleted by retention while a session may outlive its credential.
 * A live session is one with `ended_at` null; it holds a slot while `last_seen_at` is within two
 * cadences (`revalidate_seconds`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('relay_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('relay_id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('api_key_id', 'text', (c) => c.notNull())
    .addColumn('jti', 'text', (c) => c.notNull())
    .addColumn('kid', 'text', (c) => c.notNull())
    .addColumn('credential_iat', 'bigint', (c) => c.notNull())
    .addColumn('transport', 'text', (c) => c.notNull())
    .addColumn('remote', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('grant_root', 'text', (c) => c.notNull())
    .addColumn('grant_publish', 'boolean', (c) => c.notNull())
    .addColumn('grant_subscribe', 'boolean', (c) => c.notNull())
    .addColumn('tier', 'text', (c) => c.notNull())
    .addColumn('revalidate_seconds', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull())
    .addColumn('grant_expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('ended_at', 'timestamptz')
    .addColumn('end_reason', 'text')
    .addColumn('ended_by', 'text')
    .addColumn('duration_seconds', 'double precision')
    .addColumn('bytes_sent', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_received', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  // Live sessions of a tenant (rebuilding its slots) and of a project (listing).
  await db.schema
    .createIndex('relay_sessions_tenant_live')
    .on('relay_sessions')
    .columns(['tenant_id', 'last_seen_at'])
    .where(sql.ref('ended_at'), 'is', null)
    .execute();
  await db.schema
    .createIndex('relay_sessions_project_started')
    .on('relay_sessions')
    .columns(['project_id', 'started_at', 'id'])
    .execute();
  // Whether a credential has connected (it then holds no connect-window slot of its own).
  await db.schema.createIndex('relay_sessions_jti').on('relay_sessions').column('jti').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('relay_sessions').execute();
}
