import { type Kysely, sql } from 'kysely';

/**
 * Trust III: a credentials epoch per user. A password change or "sign out everywhere" moves the
 * user's epoch on; a session, CLI token or approved device grant works only while it carries the
 * user's current epoch, so everything decided under the old credentials is refused at once,
 * including what was in flight (a login whose password check overlapped the change, a grant
 * approved by a stolen session and not yet redeemed).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('users')
    .addColumn('credentials_epoch', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('sessions')
    .addColumn('credentials_epoch', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('device_grants')
    // The session that approved the grant: redeeming it needs that session still live.
    .addColumn('approved_session_id', 'text')
    // The approver's epoch at the decision.
    .addColumn('credentials_epoch', 'integer')
    .execute();
  await db.schema
    .alterTable('identity_tokens')
    // The user session at the root of the creation chain (null for tokens made before this
    // migration): revoking the user's other sessions keeps the tokens derived from the kept one.
    .addColumn('root_session_id', 'text')
    .execute();
  // Ending a user's approved grants and identity tokens finds them by user.
  await db.schema
    .createIndex('device_grants_user_id_status_idx')
    .on('device_grants')
    .columns(['user_id', 'status'])
    .where(sql.ref('status'), '=', 'approved')
    .execute();
  await db.schema
    .createIndex('identity_tokens_root_user_id_live_idx')
    .on('identity_tokens')
    .column('root_user_id')
    .where(sql.ref('revoked_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('identity_tokens_root_user_id_live_idx').execute();
  await db.schema.dropIndex('device_grants_user_id_status_idx').execute();
  await db.schema.alterTable('identity_tokens').dropColumn('root_session_id').execute();
  await db.schema
    .alterTable('device_grants')
    .dropColumn('approved_session_id')
    .dropColumn('credentials_epoch')
    .execute();
  await db.schema.alterTable('sessions').dropColumn('credentials_epoch').execute();
  await db.schema.alterTable('users').dropColumn('credentials_epoch').execute();
}
