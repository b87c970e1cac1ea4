import { type Kysely, sql } from 'kysely';

/**
 * Revoked signing keys (docs/credentials.md, "Revoking a signing key"): one row per key revoked
 * with `RevokeSigningKey`. The credential writer records no credential signed by such a key,
 * assignment and introspection refuse every credential whose JWT header names it, and the
 * revocation feed lists it in `revoked_keys` until `feed_until` (every credential the key signed
 * has expired by then). `sequence` is taken from the revocation feed's sequence, so the feed's
 * cursor moves for it and long-polls wake.
 *
 * A next key that never signed may now be removed (a revoked next key leaves the JWKS without
 * having been activated): `signing_keys_timeline` allows it, and `signing_keys_one_next` counts
 * only next keys still in the JWKS.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('revoked_signing_keys')
    .addColumn('kid', 'text', (c) => c.primaryKey().references('signing_keys.kid'))
    .addColumn('revoked_at', 'timestamptz', (c) => c.notNull())
    .addColumn('feed_until', 'timestamptz', (c) => c.notNull())
    .addColumn('sequence', 'bigint', (c) => c.notNull())
    .addColumn('revoked_by', 'text', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('signing_keys').dropConstraint('signing_keys_timeline').execute();
  await db.schema
    .alterTable('signing_keys')
    .addCheckConstraint(
      'signing_keys_timeline',
      sql`(deactivated_at is null or (activated_at is not null and remove_after is not null))
        and (removed_at is null or deactivated_at is not null or activated_at is null)`,
    )
    .execute();
  await db.schema.dropIndex('signing_keys_one_next').execute();
  await db.schema
    .createIndex('signing_keys_one_next')
    .on('signing_keys')
    .unique()
    .expression(sql`(true)`)
    .where(sql.ref('activated_at'), 'is', null)
    .where(sql.ref('removed_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('signing_keys_one_next').execute();
  await db.schema
    .createIndex('signing_keys_one_next')
    .on('signing_keys')
    .unique()
    .expression(sql`(true)`)
    .where(sql.ref('activated_at'), 'is', null)
    .execute();
  await db.schema.alterTable('signing_keys').dropConstraint('signing_keys_timeline').execute();
  await db.schema
    .alterTable('signing_keys')
    .addCheckConstraint(
      'signing_keys_timeline',
      sql`(deactivated_at is null or (activated_at is not null and remove_after is not null))
        and (removed_at is null or deactivated_at is not null)`,
    )
    .execute();
  await db.schema.dropTable('revoked_signing_keys').execute();
}
