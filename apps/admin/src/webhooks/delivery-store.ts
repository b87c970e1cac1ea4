/**
 * Webhook messages and deliveries (issue 34): facts become messages and deliveries in the
 * transaction that records them; the dispatcher picks the deliveries that may go now; a sender
 * claims one, and records the attempt's outcome.
 *
 * Ordering: a delivery goes only when it is the oldest unfinished one (lowest `seq`) of its
 * endpoint and subject, so one subject's events arrive in order, and other subjects and
 * endpoints never wait for it.
 */
import { derivedId, newId } from '@relayplane/contract/ids';
import { envelopeProblem, type WebhookEnvelope } from '@relayplane/contract/webhook-events';
import type { ReadyDelivery } from '@relayplane/shared/webhook-queue';
import { type ExpressionBuilder, type Kysely, type Selectable, sql } from 'kysely';
import type { AdminTransaction } from '../audit/trail.ts';
import type { AdminDatabase, WebhookDeliveriesTable } from '../db/schema.ts';
import type { Page, PageRequest } from '../stores/paging.ts';
import { takeReady } from './dispatch-query.ts';
import type { WebhookFact } from './facts.ts';

export type DeliveryStatus = WebhookDeliveriesTable['status'];

export interface WebhookDeliveryRecord {
  id: string;
  seq: string;
  endpointId: string;
  messageId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  createdAt: Date;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date;
  responseStatus: number | null;
  latencyMs: number | null;
  responseBody: string | null;
  error: string | null;
  completedAt: Date | null;
}

/** What a sender needs for one attempt. */
export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  messageId: string;
  attempts: number;
  /** When the fact became this delivery (the first attempt's lag is measured from it). */
  createdAt: Date;
  body: string;
}

/** One attempt's outcome. */
export interface AttemptOutcome {
  ok: boolean;
  status: number | null;
  latencyMs: number | null;
  body: string | null;
  error: string | null;
}

/** A delivery the dispatcher may hand to a sender now. */
export type { ReadyDelivery } from '@relayplane/shared/webhook-queue';

type DeliveryRow = Selectable<WebhookDeliveriesTable> & { type: string };

function toDelivery(row: DeliveryRow): WebhookDeliveryRecord {
  return {
    id: row.id,
    seq: String(row.seq),
    endpointId: row.endpoint_id,
    messageId: row.message_id,
    eventType: row.type,
    status: row.status,
    attempts: row.attempts,
    createdAt: row.created_at,
    lastAttemptAt: row.last_attempt_at,
    nextAttemptAt: row.next_attempt_at,
    responseStatus: row.response_status,
    latencyMs: row.latency_ms,
    responseBody: row.response_body,
    error: row.error,
    completedAt: row.completed_at,
  };
}

export class WebhookDeliveryStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /** The enabled endpoints subscribed to `fact` (its tenant's, its project's when it has one). */
  subscribers(db: Kysely<AdminDatabase>, fact: WebhookFact): Promise<{ id: string; tenant_id: string }[]> {
    let query = db
      .selectFrom('webhook_endpoints')
      .select(['id', 'tenant_id'])
      .where('enabled', '=', true)
      .where(sql<boolean>`${fact.type} = any(events)`);
    if (fact.tenantId !== null) query = query.where('tenant_id', '=', fact.tenantId);
    if (fact.projectId !== null) query = query.where('project_id', '=', fact.projectId);
    return query.orderBy('id').execute();
  }

  /**
   * Writes `fact` as a message per tenant with a subscribed, enabled endpoint and a delivery
   * per such endpoint, in `db` (the transaction recording the fact, or a connection: each
   * tenant's message and deliveries are one statement). A fact already written (its source id
   * seen for that type and tenant) adds nothing. Answers the deliveries added.
   */
  async fanOut(
    db: Kysely<AdminDatabase>,
    fact: WebhookFact,
    sourceId: string,
    now: Date,
    subscribed?: { id: string; tenant_id: string }[],
  ): Promise<number> {
    const endpoints = subscribed ?? (await this.subscribers(db, fact));
    if (endpoints.length === 0) return 0;
    const byTenant = new Map<string, string[]>();
    for (const e of endpoints) byTenant.set(e.tenant_id, [...(byTenant.get(e.tenant_id) ?? []), e.id]);
    let added = 0;
    for (const [tenantId, endpointIds] of byTenant) {
      // One message per source event, type and tenant: the same however often it is recorded.
      const id = derivedId('webhookMessage', `${sourceId}:${fact.type}:${tenantId}`);
      const envelope: WebhookEnvelope = {
        id,
        type: fact.type,
        timestamp: fact.occurredAt.toISOString(),
        data: { tenant_id: tenantId, project_id: fact.projectId, ...fact.data },
      };
      const problem = envelopeProblem(envelope);
      if (problem) throw new Error(`webhook ${fact.type} from ${sourceId}: ${problem}`);
      // The message, and a delivery per endpoint only if the message is new: one statement.
      const delivery = (endpointId: string) => (eb: ExpressionBuilder<{ m: { id: string } }, 'm'>) => [
        eb.val(newId('webhookDelivery')).as('id'),
        eb.val(endpointId).as('endpoint_id'),
        eb.ref('m.id').as('message_id'),
        eb.val(tenantId).as('tenant_id'),
        eb.val(fact.subject).as('subject'),
        eb.val('pending').as('status'),
        // Typed: in a UNION an untyped parameter is text.
        sql<Date>`${now}::timestamptz`.as('next_attempt_at'),
        sql<Date>`${now}::timestamptz`.as('created_at'),
      ];
      const inserted = await db
        .with('m', (q) =>
          q
            .insertInto('webhook_messages')
            .values({
              id,
              source_id: sourceId,
              tenant_id: tenantId,
              project_id: fact.projectId,
              type: fact.type,
              subject: fact.subject,
              body: JSON.stringify(envelope),
              occurred_at: fact.occurredAt,
              created_at: now,
            })
            .onConflict((oc) => oc.constraint('webhook_messages_source_key').doNothing())
            .returning('id'),
        )
        .insertInto('webhook_deliveries')
        .columns([
          'id',
          'endpoint_id',
          'message_id',
          'tenant_id',
          'subject',
          'status',
          'next_attempt_at',
          'created_at',
        ])
        .expression((eb) => {
          const [first, ...rest] = endpointIds as [string, ...string[]];
          let rows = eb.selectFrom('m').select(delivery(first));
          for (const e of rest) rows = rows.unionAll(eb.selectFrom('m').select(delivery(e)));
          return rows;
        })
        .executeTakeFirst();
      added += Number(inserted.numInsertedOrUpdatedRows ?? 0n);
    }
    return added;
  }

  /** The deliveries that may go now (dispatch-query.ts). */
  takeReady(options: Parameters<typeof takeReady>[1]): Promise<ReadyDelivery[] | undefined> {
    return takeReady(this.#db, options);
  }

  /**
   * Takes the delivery for one attempt (pending → delivering): undefined when it is not pending
   * (another sender has it, it finished, its endpoint was deleted), so each attempt has one sender.
   */
  async claim(id: string, now: Date): Promise<ClaimedDelivery | undefined> {
    // One statement: the state change and the message's body (the hot path of every attempt).
    const row = await this.#db
      .updateTable('webhook_deliveries as d')
      .from('webhook_messages as m')
      .set({ status: 'delivering', queued_at: now, last_attempt_at: now })
      .whereRef('m.id', '=', 'd.message_id')
      .where('d.id', '=', id)
      .where('d.status', '=', 'pending')
      .returning(['d.id', 'd.endpoint_id', 'd.message_id', 'd.attempts', 'd.created_at', 'm.body'])
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      id: row.id,
      endpointId: row.endpoint_id,
      messageId: row.message_id,
      attempts: row.attempts,
      createdAt: row.created_at,
      body: row.body,
    };
  }

  /**
   * Records an attempt in `trx`: succeeded, pending again at `retryAt`, or failed for good
   * (`retryAt` undefined: the schedule is spent).
   */
  async record(
    trx: Kysely<AdminDatabase>,
    id: string,
    outcome: AttemptOutcome,
    now: Date,
    retryAt: Date | undefined,
  ): Promise<void> {
    const status: DeliveryStatus = outcome.ok ? 'succeeded' : retryAt ? 'pending' : 'failed';
    const updated = await trx
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        status,
        attempts: eb('attempts', '+', 1),
        queued_at: null,
        response_status: outcome.status,
        latency_ms: outcome.latencyMs,
        response_body: outcome.body,
        error: outcome.error,
        ...(status === 'pending' && retryAt ? { next_attempt_at: retryAt } : {}),
        ...(status !== 'pending' ? { completed_at: now } : {}),
      }))
      .where('id', '=', id)
      .where('status', '=', 'delivering')
      .returning(['endpoint_id', 'subject', 'seq'])
      .executeTakeFirst();
    if (status === 'pending' && retryAt && updated) {
      // The subject's later deliveries wait for this one: not due before its retry, so passes
      // meanwhile do not look at them.
      await trx
        .updateTable('webhook_deliveries')
        .set({ next_attempt_at: retryAt })
        .where('endpoint_id', '=', updated.endpoint_id)
        .where('subject', '=', updated.subject)
        .where('seq', '>', updated.seq)
        .where('status', '=', 'pending')
        .where('next_attempt_at', '<', retryAt)
        .execute();
    }
  }

  /** A page of the endpoint's deliveries, newest first (by `seq`). */
  async list(endpointId: string, page: PageRequest): Promise<Page<WebhookDeliveryRecord>> {
    let query = this.#db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_messages as m', 'm.id', 'd.message_id')
      .selectAll('d')
      .select('m.type')
      .where('d.endpoint_id', '=', endpointId);
    // The cursor's key is the seq (its time part is the delivery's creation).
    if (page.after) query = query.where('d.seq', '<', page.after.key);
    const rows = await query
      .orderBy('d.seq', 'desc')
      .limit(page.limit + 1)
      .execute();
    const answered = rows.slice(0, page.limit);
    const last = answered.at(-1);
    return {
      items: answered.map(toDelivery),
      next:
        rows.length > page.limit && last
          ? { at: `${last.created_at.toISOString().slice(0, 23)}000Z`, key: String(last.seq) }
          : undefined,
    };
  }

  async get(endpointId: string, id: string): Promise<WebhookDeliveryRecord | undefined> {
    const row = await this.#db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_messages as m', 'm.id', 'd.message_id')
      .selectAll('d')
      .select('m.type')
      .where('d.endpoint_id', '=', endpointId)
      .where('d.id', '=', id)
      .executeTakeFirst();
    return row && toDelivery(row);
  }

  /**
   * The message of `delivery` to its endpoint again: a new delivery (same message, so the same
   * webhook-id), behind the subject's unfinished ones, in `trx`.
   */
  async redeliver(
    trx: AdminTransaction,
    delivery: WebhookDeliveryRecord,
    tenantId: string,
    now: Date,
  ): Promise<WebhookDeliveryRecord> {
    const message = await trx
      .selectFrom('webhook_messages')
      .select(['subject', 'type'])
      .where('id', '=', delivery.messageId)
      .executeTakeFirstOrThrow();
    const row = await trx
      .insertInto('webhook_deliveries')
      .values({
        id: newId('webhookDelivery'),
        endpoint_id: delivery.endpointId,
        message_id: delivery.messageId,
        tenant_id: tenantId,
        subject: message.subject,
        status: 'pending',
        next_attempt_at: now,
        created_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toDelivery({ ...row, type: message.type });
  }

  /** Deletes deliveries finished before `cutoff` and messages left with none; answers how many deliveries. */
  async prune(cutoff: Date, batch = 1_000): Promise<number> {
    let deleted = 0;
    for (;;) {
      const result = await this.#db
        .deleteFrom('webhook_deliveries')
        .where(
          'id',
          'in',
          this.#db
            .selectFrom('webhook_deliveries')
            .select('id')
            .where('completed_at', '<', cutoff)
            .limit(batch),
        )
        .executeTakeFirst();
      const n = Number(result.numDeletedRows);
      deleted += n;
      if (n < batch) break;
    }
    await this.#db
      .deleteFrom('webhook_messages as m')
      .where('m.created_at', '<', cutoff)
      .where((eb) =>
        eb.not(
          eb.exists(
            eb.selectFrom('webhook_deliveries as d').select('d.id').whereRef('d.message_id', '=', 'm.id'),
          ),
        ),
      )
      .execute();
    return deleted;
  }
}
