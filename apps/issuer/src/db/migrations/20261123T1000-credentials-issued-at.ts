import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Usage summaries (SummarizeUsage) read one day of issuance across every tenant; with
  // credentials_expires_at the planner bounds the rows overlapping a day from both sides.
  await db.schema.createIndex('credentials_issued_at').on('credentials').column('issued_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('credentials_issued_at').execute();
}
