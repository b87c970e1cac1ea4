import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('allowlist_entries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('project_id', 'text', (c) => c.notNull())
    // Normalised by the service (network address, canonical text), so equal networks compare equal.
    .addColumn('cidr', 'text', (c) => c.notNull().check(sql`cidr ~ '^[0-9a-f.:]+/[0-9]{1,3}$'`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // One entry per network and project; also serves the per-project reads (list, count, VerifyApiKey).
    .addUniqueConstraint('allowlist_entries_project_id_cidr_key', ['project_id', 'cidr'])
    // (project, tenant) together, as api_keys: an entry can never name a tenant its project is not in.
    .addForeignKeyConstraint(
      'allowlist_entries_project_fkey',
      ['project_id', 'tenant_id'],
      'projects',
      ['id', 'tenant_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('allowlist_entries').execute();
}
