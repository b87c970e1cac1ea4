import { type Kysely, sql } from 'kysely';

/**
 * Relay-session usage billed through Stripe meters (issue 33; docs/billing.md, "Metered usage"):
 * a (tenant, day) is now reported once per meter — `credentials` as before, and
 * `session_minutes`, `bytes_sent`, `bytes_received` where the plan names a meter for them. Rows
 * from before are the credentials meter's.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('metered_usage_reports')
    .addColumn('meter', 'text', (c) => c.notNull().defaultTo(sql`'credentials'`))
    .execute();
  await db.schema.alterTable('metered_usage_reports').dropConstraint('metered_usage_reports_pkey').execute();
  await db.schema
    .alterTable('metered_usage_reports')
    .addPrimaryKeyConstraint('metered_usage_reports_pkey', ['tenant_id', 'day', 'meter'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await (db as Kysely<{ metered_usage_reports: { meter: string } }>)
    .deleteFrom('metered_usage_reports')
    .where('meter', '<>', 'credentials')
    .execute();
  await db.schema.alterTable('metered_usage_reports').dropConstraint('metered_usage_reports_pkey').execute();
  await db.schema
    .alterTable('metered_usage_reports')
    .addPrimaryKeyConstraint('metered_usage_reports_pkey', ['tenant_id', 'day'])
    .execute();
  await db.schema.alterTable('metered_usage_reports').dropColumn('meter').execute();
}
