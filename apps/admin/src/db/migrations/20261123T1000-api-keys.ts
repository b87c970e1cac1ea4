import { KEY_MODE_NAMES } from '@relayplane/contract/contract';
import { literalList } from '@relayplane/shared/db';
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Lets api_keys reference (project, tenant) together, so a key can never name a tenant its project is not in.
  await db.schema
    .alterTable('projects')
    .addUniqueConstraint('projects_id_tenant_id_key', ['id', 'tenant_id'])
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in (${literalList(KEY_MODE_NAMES)})`))
    .addColumn('key_hash', 'text', (c) => c.notNull().check(sql`key_hash ~ '^[0-9a-f]{64}$'`))
    .addColumn('display_prefix', 'text', (c) => c.notNull())
    .addColumn('last_four', 'text', (c) => c.notNull())
    .addColumn('scopes', sql`text[]`, (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    // VerifyApiKey's lookup.
    .addUniqueConstraint('api_keys_key_hash_key', ['key_hash'])
    .addForeignKeyConstraint(
      'api_keys_project_fkey',
      ['project_id', 'tenant_id'],
      'projects',
      ['id', 'tenant_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
  // ListApiKeys: a project's keys, newest first.
  await db.schema
    .createIndex('api_keys_project_id_created_at_idx')
    .on('api_keys')
    .expression(sql`project_id, created_at desc, id desc`)
    .execute();
  // The plan limit counts a tenant's active keys.
  await db.schema
    .createIndex('api_keys_tenant_id_active_idx')
    .on('api_keys')
    .column('tenant_id')
    .where(sql.ref('revoked_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('api_keys').execute();
  await db.schema.alterTable('projects').dropConstraint('projects_id_tenant_id_key').execute();
}
