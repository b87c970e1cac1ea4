import { type Kysely, sql } from 'kysely';

/**
 * The audit trail (docs/audit.md): append-only events chained per tenant, and each chain's head
 * (the last event's position and hash, locked by every append so a chain stays linear across
 * replicas) with the anchor pruning leaves behind (the hash of the last pruned event).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('audit_chain_heads')
    // The tenant id, or '_platform' for events without a tenant.
    .addColumn('chain_key', 'text', (c) => c.primaryKey())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull().check(sql`hash ~ '^[0-9a-f]{64}$'`))
    // The last pruned event: verification starts from it. 0 and the genesis hash until a prune.
    .addColumn('anchor_seq', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('anchor_hash', 'text', (c) => c.notNull().defaultTo('0'.repeat(64)))
    .execute();
  await db.schema
    .createTable('audit_events')
    // A UUIDv7 (time-ordered); for delivered events the outbox's id, which makes delivery idempotent.
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('chain_key', 'text', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('occurred_at', 'timestamptz', (c) => c.notNull())
    .addColumn('tenant_id', 'text')
    .addColumn('actor_type', 'text', (c) => c.notNull())
    .addColumn('actor_id', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('target_type', 'text', (c) => c.notNull())
    .addColumn('target_id', 'text', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull().check(sql`outcome in ('success', 'failure', 'denied')`))
    .addColumn('ip', 'text')
    .addColumn('user_agent', 'text')
    .addColumn('request_id', 'text')
    .addColumn('details', 'jsonb', (c) => c.notNull())
    .addColumn('prev_hash', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull())
    // Who wrote it: admin, or the service that delivered it (issuer, billing).
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('recorded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('audit_events_chain_key_seq_key', ['chain_key', 'seq'])
    .execute();
  // Listing filters within a chain, newest first.
  await db.schema
    .createIndex('audit_events_chain_key_action_seq_idx')
    .on('audit_events')
    .columns(['chain_key', 'action', 'seq'])
    .execute();
  await db.schema
    .createIndex('audit_events_chain_key_occurred_at_idx')
    .on('audit_events')
    .columns(['chain_key', 'occurred_at'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('audit_events').execute();
  await db.schema.dropTable('audit_chain_heads').execute();
}
