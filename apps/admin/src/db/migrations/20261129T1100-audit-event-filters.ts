import type { Kysely } from 'kysely';

/**
 * ListAuditEvents filters by actor and by target within a chain, newest first: without these a
 * filter on a rare id walks the whole chain backwards (the (chain_key, seq) index) to find it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('audit_events_chain_key_actor_id_seq_idx')
    .on('audit_events')
    .columns(['chain_key', 'actor_id', 'seq'])
    .execute();
  await db.schema
    .createIndex('audit_events_chain_key_target_id_seq_idx')
    .on('audit_events')
    .columns(['chain_key', 'target_id', 'seq'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('audit_events_chain_key_target_id_seq_idx').execute();
  await db.schema.dropIndex('audit_events_chain_key_actor_id_seq_idx').execute();
}
