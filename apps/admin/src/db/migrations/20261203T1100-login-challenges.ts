import { type Kysely, sql } from 'kysely';

/**
 * The second login step of a user with a second factor: the password step leaves a challenge
 * (its `mfa_token`, stored as a SHA-256 only), which one correct code turns into a session.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('login_challenges')
    .addColumn('token_hash', 'text', (c) => c.primaryKey().check(sql`token_hash ~ '^[0-9a-f]{64}$'`))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    // What the password step verified: the session is made only while both are still current.
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('credentials_epoch', 'integer', (c) => c.notNull())
    // The device token's nonce the password step recognised (its throttle key), if any.
    .addColumn('device_nonce', 'text')
    .addColumn('failed_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('login_challenges_expires_at_idx')
    .on('login_challenges')
    .column('expires_at')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('login_challenges').execute();
}
