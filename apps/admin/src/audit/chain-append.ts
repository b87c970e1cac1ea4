/**
 * Appending one event to its chain (trail.ts): lock the head, skip a delivered duplicate, insert,
 * move the head. Runs inside the caller's transaction.
 */
import { sql, type Transaction } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import {
  type ChainedEvent,
  chainKeyOf,
  eventHash,
  GENESIS_HASH,
  type StoredAuditEvent,
  type Unchained,
} from './canonical.ts';

/**
 * Locks the chain's head, then (for delivered events, once the lock is held so a concurrent
 * delivery of the same id has committed or rolled back) skips an id already recorded, then
 * inserts the event and moves the head.
 */
export async function append(
  trx: Transaction<AdminDatabase>,
  event: Unchained,
  source: string,
  dedupe: boolean,
): Promise<StoredAuditEvent | 'duplicate'> {
  const chainKey = chainKeyOf(event.tenantId);
  const head = await trx
    .insertInto('audit_chain_heads')
    .values({ chain_key: chainKey, seq: '0', hash: GENESIS_HASH })
    .onConflict((oc) => oc.column('chain_key').doUpdateSet({ chain_key: sql`excluded.chain_key` }))
    .returning(['seq', 'hash'])
    .executeTakeFirstOrThrow();
  if (dedupe) {
    const existing = await trx
      .selectFrom('audit_events')
      .select('id')
      .where('id', '=', event.id)
      .executeTakeFirst();
    if (existing) return 'duplicate';
  }
  const chained: ChainedEvent = { ...event, seq: Number(head.seq) + 1, prevHash: head.hash };
  const hash = eventHash(chained);
  await trx
    .insertInto('audit_events')
    .values({
      id: chained.id,
      chain_key: chainKey,
      seq: String(chained.seq),
      occurred_at: chained.occurredAt,
      tenant_id: chained.tenantId,
      actor_type: chained.actor.type,
      actor_id: chained.actor.id,
      action: chained.action,
      target_type: chained.target.type,
      target_id: chained.target.id,
      outcome: chained.outcome,
      ip: chained.ip,
      user_agent: chained.userAgent,
      request_id: chained.requestId,
      details: JSON.stringify(chained.details),
      prev_hash: chained.prevHash,
      hash,
      source,
    })
    .execute();
  await trx
    .updateTable('audit_chain_heads')
    .set({ seq: String(chained.seq), hash })
    .where('chain_key', '=', chainKey)
    .execute();
  return { ...chained, hash };
}
