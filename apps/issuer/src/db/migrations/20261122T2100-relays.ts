import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('relays')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('port', 'integer', (c) => c.notNull().check(sql`port between 1 and 65535`))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('load', 'double precision', (c) =>
      c.notNull().defaultTo(0).check(sql`load >= 0 and load <= 1`),
    )
    .addColumn('last_heartbeat_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    // Soft delete: the row stays for audit, the token stops working.
    .addColumn('deleted_at', 'timestamptz')
    .execute();
  // One live relay per address; concurrent registrations of the same one lose with a conflict.
  await db.schema
    .createIndex('relays_live_address')
    .on('relays')
    .unique()
    .columns(['host', 'port'])
    .where(sql.ref('deleted_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('relays').execute();
}
