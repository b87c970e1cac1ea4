/**
 * The audit trail's storage (docs/audit.md). Invariants:
 *
 * - "Audit or refuse": `record(trx, event)` appends inside the caller's transaction, so the
 *   change and its event commit together or not at all; a failure to write the event is
 *   `unavailable` (503 + Retry-After) and the caller's transaction rolls back with it.
 * - One linear chain per tenant across replicas: an append first locks the chain's head row
 *   (an upsert, which takes the row lock even when the row exists), so appends to one chain
 *   run one after the other until commit; seq has no gaps and prev_hash is the previous event's
 *   hash. The head is the last thing a transaction locks (handlers record last), so holding it
 *   cannot deadlock with the stores' own advisory locks.
 * - Pruning deletes a prefix of a chain (by seq) and keeps the last pruned event's hash as the
 *   head's anchor; verification starts from it.
 */

import { auditEventProblem } from '@relayplane/contract/audit-event';
import type { AuditAction, AuditActorType, AuditOutcome } from '@relayplane/contract/contract';
import { AppError, errorSummary } from '@relayplane/contract/errors';
import type { AuditEvent } from '@relayplane/proto/admin';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { currentRequestContext } from '@relayplane/shared/request-context';
import type { Kysely, Transaction } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import {
  eventHash,
  GENESIS_HASH,
  type JsonValue,
  newEventId,
  PLATFORM_CHAIN,
  type StoredAuditEvent,
  type Unchained,
} from './canonical.ts';
import { append } from './chain-append.ts';
import { deliveredEvent } from './delivered-event.ts';

export type AdminTransaction = Transaction<AdminDatabase>;

export interface AuditActorRef {
  type: AuditActorType;
  id: string;
}

/** What a caller records; everything else (id, time, ip, user agent, request id) is filled in. */
export interface AuditEventInput {
  action: AuditAction;
  /** null: not tied to a tenant (the platform chain). */
  tenantId: string | null;
  target: { type: string; id: string };
  /** Default success. */
  outcome?: AuditOutcome;
  /** Default: the request's actor (`currentRequestContext().actor`), else anonymous. */
  actor?: AuditActorRef;
  /** Never a secret (a token, a password, a key): an event carrying one is refused. */
  details?: { [key: string]: JsonValue };
}

export type { StoredAuditEvent } from './canonical.ts';

export const AUDIT_UNAVAILABLE_MESSAGE = 'the audit trail cannot record this change; retry shortly';

/** The filters of a listing (validated by the caller). */
export interface AuditQuery {
  chainKey: string;
  action?: string;
  actorId?: string;
  targetId?: string;
  since?: Date;
  until?: Date;
  limit: number;
  /** Events with a smaller seq than this (the cursor). */
  beforeSeq?: number;
}

export interface VerifyResult {
  ok: boolean;
  eventsChecked: number;
  firstBadId: string | null;
  /** The seq of the first bad event (or of the chain's last one when its newest are gone). */
  firstBadSeq?: number;
}

const VERIFY_BATCH = 1000;

/** An unavailable AppError for a failed audit write (logged with its cause). */
function refused(logger: Logger, err: unknown, action: string): AppError {
  if (err instanceof AppError) return err;
  logger.error({ err: errorSummary(err), action }, 'audit event not recorded; the change is refused');
  return new AppError('unavailable', AUDIT_UNAVAILABLE_MESSAGE, { cause: err });
}

function num(value: string | number): number {
  return typeof value === 'number' ? value : Number(value);
}

type EventRow = {
  id: string;
  seq: string | number;
  occurred_at: Date;
  tenant_id: string | null;
  actor_type: string;
  actor_id: string;
  action: string;
  target_type: string;
  target_id: string;
  outcome: string;
  ip: string | null;
  user_agent: string | null;
  request_id: string | null;
  details: unknown;
  prev_hash: string;
  hash: string;
};

const EVENT_COLUMNS = [
  'id',
  'seq',
  'occurred_at',
  'tenant_id',
  'actor_type',
  'actor_id',
  'action',
  'target_type',
  'target_id',
  'outcome',
  'ip',
  'user_agent',
  'request_id',
  'details',
  'prev_hash',
  'hash',
] as const;

function toEvent(row: EventRow): StoredAuditEvent {
  return {
    id: row.id,
    seq: num(row.seq),
    occurredAt: row.occurred_at,
    tenantId: row.tenant_id,
    actor: { type: row.actor_type, id: row.actor_id },
    action: row.action,
    target: { type: row.target_type, id: row.target_id },
    outcome: row.outcome,
    ip: row.ip,
    userAgent: row.user_agent,
    requestId: row.request_id,
    details: (row.details ?? {}) as { [key: string]: JsonValue },
    prevHash: row.prev_hash,
    hash: row.hash,
  };
}

/** An event before it is chained: no seq, no prev_hash yet. */

/** Runs inside the transaction that appended `event` (webhooks: its deliveries commit with it). */
export type AppendedHook = (trx: AdminTransaction, event: StoredAuditEvent) => Promise<void>;

export class AuditTrail {
  readonly #db: Kysely<AdminDatabase>;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #hooks: AppendedHook[] = [];

  constructor(db: Kysely<AdminDatabase>, clock: Clock, logger: Logger) {
    this.#db = db;
    this.#clock = clock;
    this.#logger = logger;
  }

  /**
   * Appends `event` to its tenant's chain inside the caller's transaction `trx`. Any failure
   * throws AppError('unavailable'): the caller's transaction rolls back, and the request answers
   * 503 + Retry-After. Call it last in the transaction (see the top of this file).
   */
  /** `hook` runs in the transaction of every event appended from now on; its failure fails the append. */
  onAppended(hook: AppendedHook): void {
    this.#hooks.push(hook);
  }

  async record(trx: AdminTransaction, event: AuditEventInput): Promise<StoredAuditEvent> {
    const unchained = this.#complete(event);
    try {
      const appended = await append(trx, unchained, 'admin', false);
      if (appended === 'duplicate') throw new Error('event id already recorded');
      for (const hook of this.#hooks) await hook(trx, appended);
      return appended;
    } catch (err) {
      throw refused(this.#logger, err, event.action);
    }
  }

  /**
   * Records an event that goes with no change (a failed or throttled login, a denial) in a
   * transaction of its own. Failure: AppError('unavailable').
   */
  async recordAlone(event: AuditEventInput): Promise<StoredAuditEvent> {
    try {
      return await this.#db.transaction().execute((trx) => this.record(trx, event));
    } catch (err) {
      throw refused(this.#logger, err, event.action);
    }
  }

  /**
   * Runs `change` in a transaction: for a change made with a store bound to `trx` (stores take
   * a `Kysely`, and a transaction is one) whose event `change` records with `record(trx, …)`.
   */
  change<T>(change: (trx: AdminTransaction) => Promise<T>): Promise<T> {
    return this.#db.transaction().execute(change);
  }

  /**
   * Appends an event another service delivered (its outbox's id and time), unless an event with
   * that id is already recorded: 'duplicate'. One transaction per event.
   */
  async recordDelivered(source: string, event: AuditEvent): Promise<'recorded' | 'duplicate'> {
    const unchained = deliveredEvent(event);
    try {
      return await this.#db.transaction().execute(async (trx) => {
        const appended = await append(trx, unchained, source, true);
        if (appended === 'duplicate') return 'duplicate';
        for (const hook of this.#hooks) await hook(trx, appended);
        return 'recorded';
      });
    } catch (err) {
      throw refused(this.#logger, err, event.action);
    }
  }

  /** One page of a chain, newest first. A filter holding NUL (PostgreSQL refuses it in text) is invalid_request. */
  async list(query: AuditQuery): Promise<StoredAuditEvent[]> {
    for (const [name, value] of [
      ['action', query.action],
      ['actor_id', query.actorId],
      ['target_id', query.targetId],
    ] as const) {
      if (value?.includes('\u0000'))
        throw new AppError('invalid_request', `${name} must not contain NUL characters`);
    }
    let q = this.#db
      .selectFrom('audit_events')
      .select(EVENT_COLUMNS)
      .where('chain_key', '=', query.chainKey)
      .orderBy('seq', 'desc')
      .limit(query.limit);
    if (query.action !== undefined) q = q.where('action', '=', query.action);
    if (query.actorId !== undefined) q = q.where('actor_id', '=', query.actorId);
    if (query.targetId !== undefined) q = q.where('target_id', '=', query.targetId);
    if (query.since !== undefined) q = q.where('occurred_at', '>=', query.since);
    if (query.until !== undefined) q = q.where('occurred_at', '<', query.until);
    if (query.beforeSeq !== undefined) q = q.where('seq', '<', String(query.beforeSeq));
    const rows = await q.execute();
    return rows.map(toEvent);
  }

  /**
   * Recomputes every hash and link of a chain, oldest first, from its anchor (the genesis hash,
   * or the last pruned event's), in one snapshot. The first event whose hash, prev_hash or seq
   * does not hold is `firstBadId`; a chain whose last event is not its head's (the newest events
   * deleted) reports its last remaining event (null when none remains).
   */
  async verify(chainKey: string): Promise<VerifyResult> {
    return this.#db
      .transaction()
      .setIsolationLevel('repeatable read')
      .execute(async (trx) => {
        const head = await trx
          .selectFrom('audit_chain_heads')
          .select(['seq', 'hash', 'anchor_seq', 'anchor_hash'])
          .where('chain_key', '=', chainKey)
          .executeTakeFirst();
        let expectedSeq = head ? num(head.anchor_seq) + 1 : 1;
        let prevHash = head ? head.anchor_hash : GENESIS_HASH;
        let checked = 0;
        let last: StoredAuditEvent | undefined;
        for (;;) {
          const rows = await trx
            .selectFrom('audit_events')
            .select(EVENT_COLUMNS)
            .where('chain_key', '=', chainKey)
            .where('seq', '>', String(last ? last.seq : expectedSeq - 1))
            .orderBy('seq')
            .limit(VERIFY_BATCH)
            .execute();
          for (const row of rows) {
            const event = toEvent(row);
            checked += 1;
            if (event.seq !== expectedSeq || event.prevHash !== prevHash || eventHash(event) !== event.hash) {
              return { ok: false, eventsChecked: checked, firstBadId: event.id, firstBadSeq: event.seq };
            }
            prevHash = event.hash;
            expectedSeq += 1;
            last = event;
          }
          if (rows.length < VERIFY_BATCH) break;
        }
        const headSeq = head ? num(head.seq) : 0;
        const headHash = head ? head.hash : GENESIS_HASH;
        if (expectedSeq - 1 !== headSeq || prevHash !== headHash) {
          return {
            ok: false,
            eventsChecked: checked,
            firstBadId: last?.id ?? null,
            firstBadSeq: last ? last.seq + 1 : expectedSeq,
          };
        }
        return { ok: true, eventsChecked: checked, firstBadId: null };
      });
  }

  /**
   * Deletes, chain by chain, the events older than `cutoff` that precede every newer one (a
   * prefix by seq: delivered events may be appended after younger ones), keeping the last pruned
   * event's hash as the anchor verification starts from. Returns how many were deleted.
   */
  async prune(cutoff: Date): Promise<number> {
    const chains = await this.#db
      .selectFrom('audit_events')
      .select('chain_key')
      .where('occurred_at', '<', cutoff)
      .distinct()
      .execute();
    let deleted = 0;
    for (const { chain_key: chainKey } of chains) {
      deleted += await this.#db.transaction().execute(async (trx) => {
        const head = await trx
          .selectFrom('audit_chain_heads')
          .select(['seq', 'anchor_seq'])
          .where('chain_key', '=', chainKey)
          .forUpdate()
          .executeTakeFirst();
        if (!head) return 0;
        const keep = await trx
          .selectFrom('audit_events')
          .select((eb) => eb.fn.min('seq').as('seq'))
          .where('chain_key', '=', chainKey)
          .where('occurred_at', '>=', cutoff)
          .executeTakeFirst();
        const keepFrom = keep?.seq != null ? num(keep.seq as string) : num(head.seq) + 1;
        const lastPruned = keepFrom - 1;
        if (lastPruned <= num(head.anchor_seq)) return 0;
        // The last pruned event itself (a chain someone deleted events from: the last one there is).
        const anchor = await trx
          .selectFrom('audit_events')
          .select(['seq', 'hash'])
          .where('chain_key', '=', chainKey)
          .where('seq', '<=', String(lastPruned))
          .orderBy('seq', 'desc')
          .limit(1)
          .executeTakeFirst();
        if (!anchor) return 0;
        const res = await trx
          .deleteFrom('audit_events')
          .where('chain_key', '=', chainKey)
          .where('seq', '<=', String(anchor.seq))
          .executeTakeFirst();
        await trx
          .updateTable('audit_chain_heads')
          .set({ anchor_seq: String(anchor.seq), anchor_hash: anchor.hash })
          .where('chain_key', '=', chainKey)
          .execute();
        const deleted = Number(res.numDeletedRows);
        // The pruning itself stays in the chain: a gap at its start is explained, not silent.
        await append(
          trx,
          this.#complete({
            action: 'audit.prune',
            tenantId: chainKey === PLATFORM_CHAIN ? null : chainKey,
            actor: { type: 'system', id: 'audit-prune' },
            target: { type: 'audit_chain', id: chainKey },
            details: {
              deleted,
              before: cutoff.toISOString(),
              anchor_seq: Number(anchor.seq),
              anchor_hash: anchor.hash,
            },
          }),
          'admin',
          false,
        );
        return deleted;
      });
    }
    return deleted;
  }

  #complete(event: AuditEventInput): Unchained {
    const context = currentRequestContext();
    const details = event.details ?? {};
    const actor = event.actor ?? context?.actor ?? { type: 'anonymous', id: '' };
    const outcome = event.outcome ?? 'success';
    // The checks RecordAuditEvents applies (@relayplane/contract/audit-event). A failure is a
    // programming error, never a user's: the event is refused with the change.
    const problem = auditEventProblem({
      action: event.action,
      actor,
      target: event.target,
      outcome,
      details,
    });
    if (problem) throw new AppError('internal', `audit event ${event.action}: ${problem}`);
    const now = this.#clock.now();
    return {
      id: newEventId(now),
      occurredAt: now,
      tenantId: event.tenantId,
      actor,
      action: event.action,
      target: event.target,
      outcome,
      ip: context?.clientIp ?? null,
      userAgent: context?.userAgent ?? null,
      requestId: context?.requestId ?? null,
      details,
    };
  }
}

/**
 * A store's audit step: runs inside the store's transaction once the change is made (with
 * what it came to), before commit. It records the change's event; if it throws, nothing commits.
 */
export type AuditStep<R> = (trx: AdminTransaction, result: R) => Promise<unknown>;
