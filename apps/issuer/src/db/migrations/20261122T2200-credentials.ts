import { KEY_MODE_NAMES } from '@relayplane/contract/contract';
import { literalList } from '@relayplane/shared/db';
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One row per credential ever issued, written before the credential is handed out.
  await db.schema
    .createTable('credentials')
    .addColumn('jti', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('api_key_id', 'text', (c) => c.notNull())
    .addColumn('kid', 'text', (c) => c.notNull())
    .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in (${literalList(KEY_MODE_NAMES)})`))
    // Space-separated, exactly the `scope` claim.
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('issued_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .addCheckConstraint('credentials_lifetime', sql`expires_at > issued_at`)
    .execute();
  // Retention (deleting expired rows) and per-tenant usage reads (credentials_tenant_issued is
  // dropped again by 20261125T1600: no query used it).
  await db.schema.createIndex('credentials_expires_at').on('credentials').column('expires_at').execute();
  await db.schema
    .createIndex('credentials_tenant_issued')
    .on('credentials')
    .columns(['tenant_id', 'issued_at'])
    .execute();

  // The revocation feed relays follow: append-only, ordered by `sequence`.
  await db.schema
    .createTable('revocations')
    .addColumn('sequence', 'bigserial', (c) => c.primaryKey())
    .addColumn('jti', 'text', (c) => c.notNull().unique().references('credentials.jti'))
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('revocations').execute();
  await db.schema.dropTable('credentials').execute();
}
