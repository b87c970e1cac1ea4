import { type Kysely, sql } from 'kysely';

/**
 * Signed checkpoints of each chain's head (issue 31; docs/audit.md, "Signed checkpoints"). The
 * signature is made with a key outside the database: a row here proves nothing by itself; the
 * JWS does, against the published key.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('audit_checkpoints')
    .addColumn('chain_key', 'text', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull().check(sql`hash ~ '^[0-9a-f]{64}$'`))
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('kid', 'text', (c) => c.notNull())
    .addColumn('jws', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_checkpoints_pkey', ['chain_key', 'seq'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('audit_checkpoints').execute();
}
