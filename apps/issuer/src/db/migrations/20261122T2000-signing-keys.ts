import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('signing_keys')
    .addColumn('kid', 'text', (c) => c.primaryKey())
    .addColumn('x', 'text', (c) => c.notNull())
    .addColumn('kek_fingerprint', 'text', (c) => c.notNull())
    .addColumn('private_iv', 'bytea')
    .addColumn('private_ciphertext', 'bytea')
    .addColumn('private_tag', 'bytea')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('activated_at', 'timestamptz')
    .addColumn('deactivated_at', 'timestamptz')
    .addColumn('remove_after', 'timestamptz')
    .addColumn('removed_at', 'timestamptz')
    // The private half exists exactly as long as the key is not removed.
    .addCheckConstraint(
      'signing_keys_private_half',
      sql`(removed_at is null) = (private_iv is not null and private_ciphertext is not null and private_tag is not null)
        and (private_iv is null) = (private_ciphertext is null) and (private_tag is null) = (private_ciphertext is null)`,
    )
    .addCheckConstraint(
      'signing_keys_timeline',
      sql`(deactivated_at is null or (activated_at is not null and remove_after is not null))
        and (removed_at is null or deactivated_at is not null)`,
    )
    .execute();
  // Replicas serialize on an advisory lock; these indexes make a lost race an error, not two signers.
  await db.schema
    .createIndex('signing_keys_one_active')
    .on('signing_keys')
    .unique()
    .expression(sql`(true)`)
    .where(sql.ref('activated_at'), 'is not', null)
    .where(sql.ref('deactivated_at'), 'is', null)
    .execute();
  await db.schema
    .createIndex('signing_keys_one_next')
    .on('signing_keys')
    .unique()
    .expression(sql`(true)`)
    .where(sql.ref('activated_at'), 'is', null)
    .execute();
  await db.schema
    .createTable('rotation_requests')
    .addColumn('id', 'smallint', (c) => c.primaryKey().defaultTo(1).check(sql`id = 1`))
    .addColumn('requested_at', 'timestamptz', (c) => c.notNull())
    .addColumn('requested_by', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('rotation_requests').execute();
  await db.schema.dropTable('signing_keys').execute();
}
