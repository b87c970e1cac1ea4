import { type Kysely, sql } from 'kysely';

/**
 * A relay may authenticate with a client certificate registered for it (issue 33;
 * docs/credentials.md, "Setting up a relay"): the SHA-256 of its DER, unique among live relays.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('relays').addColumn('client_cert_sha256', 'text').execute();
  await db.schema
    .createIndex('relays_live_client_cert')
    .on('relays')
    .column('client_cert_sha256')
    .unique()
    .where(sql.ref('deleted_at'), 'is', null)
    .where(sql.ref('client_cert_sha256'), 'is not', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('relays_live_client_cert').execute();
  await db.schema.alterTable('relays').dropColumn('client_cert_sha256').execute();
}
