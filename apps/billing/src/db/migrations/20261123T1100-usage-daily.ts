import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Daily usage per tenant and project ('' = the tenant's total), replaced one day at a time
  // by the usage job (see src/jobs/usage-aggregation.ts). The key serves the per-tenant range reads.
  await db.schema
    .createTable('usage_daily')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('credentials_issued', 'bigint', (c) => c.notNull())
    .addColumn('peak_concurrent_connections', 'integer', (c) => c.notNull())
    .addColumn('computed_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('usage_daily_pkey', ['tenant_id', 'day', 'project_id'])
    .execute();
  // The job replaces a whole day across tenants.
  await db.schema.createIndex('usage_daily_day').on('usage_daily').column('day').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('usage_daily').execute();
}
