import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // CLI tokens (device flow) are sessions of their own kind.
  await db.schema
    .alterTable('sessions')
    .addColumn('kind', 'text', (c) => c.notNull().defaultTo('session').check(sql`kind in ('session', 'cli')`))
    .execute();

  await db.schema
    .createTable('device_grants')
    // SHA-256 (hex) of the device code; neither code is ever stored.
    .addColumn('device_code_hash', 'text', (c) =>
      c.primaryKey().check(sql`device_code_hash ~ '^[0-9a-f]{64}$'`),
    )
    // SHA-256 (hex) of the normalised user code (XXXX-XXXX).
    .addColumn('user_code_hash', 'text', (c) => c.notNull().check(sql`user_code_hash ~ '^[0-9a-f]{64}$'`))
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'approved', 'denied', 'consumed')`),
    )
    .addColumn('interval_seconds', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('last_polled_at', 'timestamptz')
    // Set by the decision: who approved (the CLI token acts as them, in this tenant).
    .addColumn('user_id', 'text', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('tenant_id', 'text', (c) => c.references('tenants.id').onDelete('cascade'))
    .addColumn('decided_at', 'timestamptz')
    // The verification page's lookup; a collision is retried with a new code.
    .addUniqueConstraint('device_grants_user_code_hash_key', ['user_code_hash'])
    .addCheckConstraint(
      'device_grants_approved_has_user',
      sql`status not in ('approved', 'consumed') or (user_id is not null and tenant_id is not null)`,
    )
    .execute();
  // The sweep of expired grants.
  await db.schema
    .createIndex('device_grants_expires_at_idx')
    .on('device_grants')
    .column('expires_at')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('device_grants').execute();
  await db.schema.alterTable('sessions').dropColumn('kind').execute();
}
