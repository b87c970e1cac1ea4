import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('identity_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    // The identity: a bot of the project.
    .addColumn('bot_id', 'text', (c) => c.notNull())
    // SHA-256 (hex) of the token; the token itself is never stored.
    .addColumn('token_hash', 'text', (c) => c.notNull().check(sql`token_hash ~ '^[0-9a-f]{64}$'`))
    .addColumn('scopes', sql`text[]`, (c) => c.notNull())
    .addColumn('display_prefix', 'text', (c) => c.notNull())
    .addColumn('last_four', 'text', (c) => c.notNull())
    // Who created it: a user (session) or another identity token (the audit trail; a token
    // works only while every token it descends from is live).
    .addColumn('created_by_user_id', 'text')
    .addColumn('created_by_token_id', 'text')
    // The user at the root of the creation chain: a token works only while that user is still
    // a member of the tenant, and holds no scope the user's role no longer grants.
    .addColumn('root_user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    .addUniqueConstraint('identity_tokens_token_hash_key', ['token_hash'])
    .addCheckConstraint('identity_tokens_expiry_check', sql`expires_at > created_at`)
    // Deleting a bot (or its project or tenant) deletes its tokens.
    .addForeignKeyConstraint(
      'identity_tokens_bot_fkey',
      ['bot_id', 'project_id', 'tenant_id'],
      'bots',
      ['id', 'project_id', 'tenant_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
  await db.schema
    .createIndex('identity_tokens_bot_id_created_at_idx')
    .on('identity_tokens')
    .expression(sql`bot_id, created_at desc, id desc`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('identity_tokens').execute();
}
