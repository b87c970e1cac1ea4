import { type Kysely, sql } from 'kysely';

/**
 * A tenant's live credentials, for rebuilding its connection slots after Redis lost them
 * (`CredentialStore.liveLeases`): one range scan over (tenant_id, expires_at > now), read
 * longest-lived first. Partial on `revoked_at is null`, so the scan never meets revoked rows
 * and reads at most the tenant's live credentials — which never exceed its cap.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('credentials_tenant_live')
    .on('credentials')
    .columns(['tenant_id', 'expires_at'])
    .where(sql.ref('revoked_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('credentials_tenant_live').execute();
}
