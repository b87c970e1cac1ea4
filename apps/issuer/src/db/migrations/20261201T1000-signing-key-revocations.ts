import type { Kysely } from 'kysely';

/**
 * Revoked signing keys (docs/credentials.md, "Revoking a signing key"): one row per key revoked
 * with `RevokeSigningKey`. The credential writer records no credential signed by such a key,
 * assignment and introspection refuse every credential whose JWT header names it, and the
 * revocation feed lists it in `revoked_keys` until `feed_until` (every credential the key signed
 * has expired by then). `sequence` is taken from the revocation feed's sequence, so the feed's
 * cursor moves for it and long-polls wake.
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
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('revoked_signing_keys').execute();
}
