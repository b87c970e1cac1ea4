import type { Kysely } from 'kysely';

/**
 * Containment of a leaked API key (docs/credentials.md, "Containment"):
 *
 * - `project_watermarks`: per project, credentials issued before `issued_before` are refused
 *   (assignment, introspection, and verifiers through the revocation feed). Only raised.
 *   `sequence` is taken from the revocation feed's sequence when it is raised, so the feed's
 *   cursor moves for it and long-polls wake.
 * - `revoked_api_keys`: an API key whose credentials were revoked with it; the credential
 *   writer records no credential of such a key afterwards (it is refused instead).
 * - `credentials_project_issued`: lists a project's credentials newest first (ListCredentials).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('project_watermarks')
    .addColumn('project_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('issued_before', 'timestamptz', (c) => c.notNull())
    .addColumn('sequence', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('revoked_api_keys')
    .addColumn('api_key_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('credentials_project_issued')
    .on('credentials')
    .columns(['project_id', 'issued_at', 'jti'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('credentials_project_issued').execute();
  await db.schema.dropTable('revoked_api_keys').execute();
  await db.schema.dropTable('project_watermarks').execute();
}
