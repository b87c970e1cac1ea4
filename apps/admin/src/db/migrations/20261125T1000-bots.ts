import { BOT_ROLE_NAMES } from '@relayplane/contract/contract';
import { literalList } from '@relayplane/shared/db';
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('bots')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull().check(sql`role in (${literalList(BOT_ROLE_NAMES)})`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // Lets bot_keys reference (bot, project, tenant) together.
    .addUniqueConstraint('bots_id_project_id_tenant_id_key', ['id', 'project_id', 'tenant_id'])
    // (project, tenant) together, as api_keys: a bot can never name a tenant its project is not in.
    .addForeignKeyConstraint(
      'bots_project_fkey',
      ['project_id', 'tenant_id'],
      'projects',
      ['id', 'tenant_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
  // ListBots, and the plan limit's tenant-wide count.
  await db.schema
    .createIndex('bots_project_id_idx')
    .on('bots')
    .columns(['project_id', 'created_at'])
    .execute();
  await db.schema.createIndex('bots_tenant_id_idx').on('bots').column('tenant_id').execute();

  await db.schema
    .createTable('bot_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('bot_id', 'text', (c) => c.notNull())
    // SHA-256 (hex) of the bot token; the token itself is never stored.
    .addColumn('token_hash', 'text', (c) => c.notNull().check(sql`token_hash ~ '^[0-9a-f]{64}$'`))
    .addColumn('display_prefix', 'text', (c) => c.notNull())
    .addColumn('last_four', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    // Authenticate's lookup.
    .addUniqueConstraint('bot_keys_token_hash_key', ['token_hash'])
    .addForeignKeyConstraint(
      'bot_keys_bot_fkey',
      ['bot_id', 'project_id', 'tenant_id'],
      'bots',
      ['id', 'project_id', 'tenant_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
  await db.schema
    .createIndex('bot_keys_bot_id_created_at_idx')
    .on('bot_keys')
    .expression(sql`bot_id, created_at desc, id desc`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('bot_keys').execute();
  await db.schema.dropTable('bots').execute();
}
