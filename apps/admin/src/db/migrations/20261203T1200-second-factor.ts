import { type Kysely, sql } from 'kysely';

/**
 * A second factor for people (issue 31): TOTP enrolments (the secret sealed under a key derived
 * from the KEK, never in clear), single-use recovery codes (hashes only), and the tenant setting
 * that requires them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('user_totp')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    // AES-256-GCM: `v1.<iv>.<tag>.<ciphertext>` (base64url), the user id as associated data.
    .addColumn('sealed_secret', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('pending', 'confirmed')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('confirmed_at', 'timestamptz')
    // The last time step whose code was accepted: a code is accepted once (a later step only).
    .addColumn('last_step', 'bigint')
    .execute();
  await db.schema
    .createTable('user_recovery_codes')
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    // SHA-256 (hex) of the normalised code; the code is shown once.
    .addColumn('code_hash', 'text', (c) => c.notNull().check(sql`code_hash ~ '^[0-9a-f]{64}$'`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('used_at', 'timestamptz')
    .addPrimaryKeyConstraint('user_recovery_codes_pkey', ['user_id', 'code_hash'])
    .execute();
  await db.schema
    .alterTable('tenants')
    .addColumn('require_mfa', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('tenants').dropColumn('require_mfa').execute();
  await db.schema.dropTable('user_recovery_codes').execute();
  await db.schema.dropTable('user_totp').execute();
}
