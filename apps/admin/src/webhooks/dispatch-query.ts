/**
 * The dispatcher's query (webhooks.ts): which deliveries may go now, taken in one pass.
 */

import type { ReadyDelivery } from '@relayplane/shared/webhook-queue';
import { type Kysely, sql } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';

/**
 * Deliveries that may go now, in one transaction that holds `lockKey` (one dispatcher pass at a
 * time across replicas; undefined when another holds it), oldest due first: due, not handed to
 * a sender within `requeueAfterMs` (a job lost with Redis or a sender that died goes again
 * after that), of an enabled endpoint with room (`perEndpoint` in flight, `failingPerEndpoint`
 * while it fails), and the oldest unfinished delivery of its endpoint and subject. They are
 * marked handed over now.
 *
 * Cost: the endpoints with attempts in flight (at most the senders' count, a partial index),
 * then the due deliveries in `next_attempt_at` order with an index probe each for an earlier
 * one of the subject. Saturated endpoints are left out in the query, so a dead endpoint's
 * backlog never fills a pass and hides the others' deliveries.
 */
export async function takeReady(
  db: Kysely<AdminDatabase>,
  options: {
    lockKey: number;
    now: Date;
    limit: number;
    requeueAfterMs: number;
    perEndpoint: number;
    failingPerEndpoint: number;
  },
): Promise<ReadyDelivery[] | undefined> {
  const { now } = options;
  const stale = new Date(now.getTime() - options.requeueAfterMs);
  return db.transaction().execute(async (trx) => {
    const locked = await sql<{
      locked: boolean;
    }>`select pg_try_advisory_xact_lock(${options.lockKey}) as locked`.execute(trx);
    if (!locked.rows[0]?.locked) return undefined;
    const flying = await trx
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .select(['d.endpoint_id', sql<boolean>`(e.failing_since is not null)`.as('failing')])
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('d.queued_at', '>', stale)
      .where('d.status', 'in', ['pending', 'delivering'])
      .groupBy(['d.endpoint_id', 'e.failing_since'])
      .execute();
    const inFlight = new Map<string, number>();
    const saturated: string[] = [];
    for (const f of flying) {
      const n = Number(f.n);
      inFlight.set(f.endpoint_id, n);
      if (n >= (f.failing ? options.failingPerEndpoint : options.perEndpoint)) saturated.push(f.endpoint_id);
    }
    let due = trx
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .select([
        'd.id',
        'd.endpoint_id',
        'd.attempts',
        sql<boolean>`(e.failing_since is not null)`.as('failing'),
      ])
      .where('d.status', 'in', ['pending', 'delivering'])
      .where('d.next_attempt_at', '<=', now)
      .where((eb) => eb.or([eb('d.queued_at', 'is', null), eb('d.queued_at', '<=', stale)]))
      .where('e.enabled', '=', true)
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('webhook_deliveries as p')
              .select('p.id')
              .whereRef('p.endpoint_id', '=', 'd.endpoint_id')
              .whereRef('p.subject', '=', 'd.subject')
              .whereRef('p.seq', '<', 'd.seq')
              .where('p.status', 'in', ['pending', 'delivering']),
          ),
        ),
      );
    if (saturated.length > 0) due = due.where('d.endpoint_id', 'not in', saturated);
    const rows = await due
      .orderBy('d.next_attempt_at')
      .limit(options.limit * 4)
      .execute();
    const ready: ReadyDelivery[] = [];
    for (const h of rows) {
      if (ready.length >= options.limit) break;
      const cap = h.failing ? options.failingPerEndpoint : options.perEndpoint;
      const n = inFlight.get(h.endpoint_id) ?? 0;
      if (n >= cap) continue;
      inFlight.set(h.endpoint_id, n + 1);
      ready.push({ id: h.id, endpointId: h.endpoint_id, attempts: h.attempts });
    }
    if (ready.length > 0) {
      // A sender that died mid-attempt left 'delivering': it is pending again.
      await trx
        .updateTable('webhook_deliveries')
        .set({ queued_at: now, status: 'pending' })
        .where(
          'id',
          'in',
          ready.map((r) => r.id),
        )
        .execute();
    }
    return ready;
  });
}
