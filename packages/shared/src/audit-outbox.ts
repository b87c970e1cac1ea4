/**
 * The audit outbox of a service that does not own the audit trail (issuer, billing).
 *
 * Admin keeps the trail (its own schema, a hash chain per tenant); issuer and billing change
 * their own schemas, so "audit or refuse" (docs/audit.md) cannot be one transaction across
 * both. Instead, a change and an `audit_outbox` row commit in the same transaction of the
 * service's schema, and a deliverer sends pending rows to admin's `RecordAuditEvents`:
 *
 * - **Refuse.** `enqueue(trx, event)` inserts the row inside the caller's transaction. If it
 *   cannot (PostgreSQL refuses, a trigger raises), it throws `unavailable` (503 +
 *   Retry-After), so the caller's transaction rolls back and nothing changed. An event admin
 *   would refuse on delivery (`auditEventProblem`, @relayplane/contract/audit-event: the checks
 *   admin applies) throws `internal` before anything is written: it fails its change instead of
 *   being set aside after the change committed, and a secret in it is written nowhere.
 * - **At least once.** A row is deleted only in the transaction that saw admin accept it;
 *   admin down, a crash between the call and the delete, or a lost answer leaves it to be
 *   sent again. Admin treats an id it already holds as a duplicate, so repeats are harmless.
 *   The id is a UUIDv7 assigned when the row is written: ordered by time, the same on
 *   every attempt.
 * - **Not twice in the normal case, oldest first.** A pass runs in one transaction that takes
 *   a transaction-scoped advisory lock for the service (`pg_try_advisory_xact_lock`; a replica
 *   finding it taken skips the pass, the holder delivers), claims the oldest rows with
 *   `FOR UPDATE SKIP LOCKED`, calls admin and deletes them. One deliverer at a time per
 *   schema keeps a tenant's events in the order they were written (plan changes, rotations).
 * - **Within 2 s.** Callers `kick()` after their commit (delivery starts at once); a poll every
 *   `pollIntervalMs` (500 ms) sends what a kick missed (another replica's rows, a kick during
 *   a pass, rows left by a crash).
 * - **Admin down.** A failed pass backs off (100 ms doubling to 5 s, jittered) and tries again;
 *   requests never wait for delivery, and rows stay until admin takes them. An event admin
 *   refuses as invalid (`invalid_request`, which no retry can change) is set aside
 *   (`failed_at`, kept for an operator, counted and logged) so it cannot block the ones behind.
 *
 * How to use it (issuer and billing):
 *
 *   await db.transaction().execute(async (trx) => {
 *     ...the change...
 *     await enqueueAuditEvent(trx, {
 *       action: 'credentials.bulk_revoke',
 *       tenantId,
 *       target: { type: 'project', id: projectId },
 *       details: { api_key_id, revoked: n },          // never a secret
 *     });
 *   });
 *   outbox.kick();                                     // after the commit
 *
 * In the issuer and billing, components get the service's `AuditOutbox` as an `AuditRecorder`
 * (`deps.audit.enqueue(trx, event)`, then `deps.audit.kick()`).
 *
 * Actor, IP, user agent and request id come from `currentRequestContext()` (what the gateway
 * sent as gRPC metadata); a scheduled job passes `actor: systemActor('<job name>')`.
 */
import { createHash } from 'node:crypto';
import type { AuditSource } from '@relayplane/contract/contract';
import { AppError, type ErrorCode, errorSummary, toAppError } from '@relayplane/contract/errors';
import { AdminService } from '@relayplane/proto/admin';
import type { ServiceClient } from '@relayplane/proto/grpc';
import { type Kysely, sql } from 'kysely';
import {
  type AuditEventInput,
  type AuditOutboxDatabase,
  type AuditOutboxTable,
  deliveredMessage,
  enqueueAuditEvent,
  enqueueNotice,
  type NoticeInput,
  type OutboxTransaction,
} from './audit-outbox-rows.ts';
import type { Logger } from './logger.ts';
import { type Counter, counter, type Gauge, gauge, type Registry } from './metrics.ts';
import { connect } from './rpc.ts';

export {
  AUDIT_UNAVAILABLE_MESSAGE,
  type AuditEventInput,
  type AuditOutboxDatabase,
  type AuditOutboxTable,
  deliveredMessage,
  enqueueAuditEvent,
  enqueueNotice,
  eventMessage,
  type NoticeInput,
  newAuditEventId,
  type OutboxTransaction,
  RESTAMP_AFTER_MS,
  systemActor,
} from './audit-outbox-rows.ts';

/** What a component that records events needs: a write inside its transaction, a kick after the commit. */
export interface AuditRecorder {
  /** `enqueueAuditEvent` (throws `unavailable` when the row cannot be written). */
  enqueue(trx: OutboxTransaction, event: AuditEventInput): Promise<string>;
  /** `enqueueNotice`: a webhook-only fact, in the caller's transaction (issue 34). */
  notice(trx: OutboxTransaction, notice: NoticeInput): Promise<string>;
  /** Delivery now, after the commit that wrote events (coalesced, never waits). */
  kick(): void;
}

const ADMIN_NOT_STARTED_MESSAGE = 'admin is not started yet';

/** What the deliverer calls: admin's RecordAuditEvents. */
export type AuditAdminClient = Pick<ServiceClient<typeof AdminService>, 'recordAuditEvents'>;
type AdminClient = AuditAdminClient;

/**
 * An admin client for a composition root that starts admin after the services whose outboxes
 * deliver to it (embedded mode: issuer and billing start first). Until `connectTo`, a delivery
 * fails as unavailable and the outbox keeps its rows and retries.
 */
export class DeferredAuditAdmin implements AuditAdminClient {
  #client: ServiceClient<typeof AdminService> | undefined;

  /** `caller`: the service whose outbox this delivers (admin takes the source from it, issue 31). */
  connectTo(address: string, caller: AuditSource): void {
    this.#client?.close();
    this.#client = connect(AdminService, address, { caller });
  }

  recordAuditEvents: AuditAdminClient['recordAuditEvents'] = (req, opts) => {
    if (!this.#client) return Promise.reject(new AppError('unavailable', ADMIN_NOT_STARTED_MESSAGE));
    return this.#client.recordAuditEvents(req, opts);
  };

  close(): void {
    this.#client?.close();
    this.#client = undefined;
  }
}

export interface AuditOutboxOptions {
  /** The service's database (its schema holds `audit_outbox`). */
  db: Kysely<AuditOutboxDatabase>;
  /** `issuer` or `billing`: admin's `source`, and the advisory lock's name. */
  source: 'issuer' | 'billing';
  admin: AdminClient;
  logger: Logger;
  /** Where `relayplane_audit_outbox_*` go; absent: not counted. */
  metrics?: Registry;
  /** How often leftovers are looked for (default 500 ms). */
  pollIntervalMs?: number;
  /** Events per RecordAuditEvents call (default 100). */
  batchSize?: number;
  /** Deadline of one RecordAuditEvents call (default 2 s). */
  callTimeoutMs?: number;
  /** Backoff after a failed pass: first and longest wait (default 100 ms, 5 s). */
  backoffMs?: { initial: number; max: number };
}

type PassResult = 'idle' | 'more' | 'busy' | 'failed';

/** Errors no retry can change: the event is set aside rather than blocking the rest. */
const PERMANENT_CODES: ReadonlySet<ErrorCode> = new Set(['invalid_request']);

/**
 * Delivers a service's outbox to admin: `start()` begins polling, `kick()` asks for a pass
 * now (coalesced), `stop()` waits for the pass in flight (graceful shutdown).
 */
export class AuditOutbox implements AuditRecorder {
  readonly #db: Kysely<AuditOutboxDatabase>;
  readonly #source: 'issuer' | 'billing';
  readonly #admin: AdminClient;
  readonly #logger: Logger;
  readonly #pollIntervalMs: number;
  readonly #batchSize: number;
  readonly #callTimeoutMs: number;
  readonly #backoff: { initial: number; max: number };
  readonly #lockKey: number;
  readonly #metrics: { pending: Gauge; delivered: Counter; failures: Counter; setAside: Counter } | undefined;
  #poll: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #started = false;
  #stopped = false;
  #failures = 0;

  constructor(options: AuditOutboxOptions) {
    this.#db = options.db;
    this.#source = options.source;
    this.#admin = options.admin;
    this.#logger = options.logger;
    this.#pollIntervalMs = options.pollIntervalMs ?? 500;
    this.#batchSize = options.batchSize ?? 100;
    this.#callTimeoutMs = options.callTimeoutMs ?? 2_000;
    this.#backoff = options.backoffMs ?? { initial: 100, max: 5_000 };
    // Issuer and billing may share one PostgreSQL database (advisory locks are per database).
    this.#lockKey = createHash('sha256')
      .update(`relayplane:audit-outbox:${options.source}`)
      .digest()
      .readInt32BE(0);
    if (options.metrics) {
      const registry = options.metrics;
      this.#metrics = {
        pending: gauge(registry, {
          name: 'relayplane_audit_outbox_pending',
          help: 'Audit events written to this service’s outbox and not yet delivered to admin (seen at the last delivery pass).',
        }),
        delivered: counter(registry, {
          name: 'relayplane_audit_outbox_delivered_total',
          help: 'Audit events delivered from this service’s outbox to admin (a duplicate admin already held included).',
        }),
        failures: counter(registry, {
          name: 'relayplane_audit_outbox_delivery_failures_total',
          help: 'Failed delivery passes of the audit outbox (admin or PostgreSQL unavailable); the events stay and are sent again.',
        }),
        setAside: counter(registry, {
          name: 'relayplane_audit_outbox_set_aside_total',
          help: 'Audit events admin refused as invalid, kept in the outbox with failed_at and no longer delivered.',
        }),
      };
    }
  }

  enqueue(trx: OutboxTransaction, event: AuditEventInput): Promise<string> {
    return enqueueAuditEvent(trx, event);
  }

  notice(trx: OutboxTransaction, notice: NoticeInput): Promise<string> {
    return enqueueNotice(trx, notice);
  }

  /** Starts polling (and delivers what is pending). Idempotent. */
  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    this.#poll = setInterval(() => this.kick(), this.#pollIntervalMs);
    this.#poll.unref();
    this.kick();
  }

  /** Asks for a delivery pass now; coalesced with one in flight, ignored while backing off. */
  kick(): void {
    if (!this.#started || this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    if (this.#retry) return;
    this.#running = this.#drain().finally(() => {
      this.#running = undefined;
    });
  }

  /** Stops polling and waits for the pass in flight; pending rows stay for the next start. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#poll);
    clearTimeout(this.#retry);
    this.#retry = undefined;
    await this.#running;
  }

  /** Passes until one finds nothing more to send (or fails, then backs off). */
  async #drain(): Promise<void> {
    for (;;) {
      this.#again = false;
      let result: PassResult;
      try {
        result = await this.#pass();
      } catch (err) {
        this.#failed(err);
        return;
      }
      if (result === 'failed') return;
      if (this.#failures > 0) {
        this.#logger.info({ source: this.#source }, 'audit outbox delivering again');
        this.#failures = 0;
      }
      if (this.#stopped) return;
      if (result === 'more') continue;
      if (!this.#again) return;
    }
  }

  #failed(err: unknown): void {
    this.#metrics?.failures.inc();
    this.#failures += 1;
    if (this.#failures === 1) {
      // Expected while an embedded start brings admin up after this service: not a warning.
      const waiting = err instanceof AppError && err.message === ADMIN_NOT_STARTED_MESSAGE;
      this.#logger[waiting ? 'info' : 'warn'](
        { source: this.#source, err: errorSummary(err) },
        waiting
          ? 'audit outbox: admin is not started yet; the events wait for it'
          : 'audit outbox: delivery failed; the events stay and are sent again',
      );
    }
    if (this.#stopped) return;
    const exp = Math.min(this.#backoff.max, this.#backoff.initial * 2 ** Math.min(this.#failures - 1, 16));
    const wait = Math.round(exp * (0.5 + Math.random() * 0.5));
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.kick();
    }, wait);
    this.#retry.unref();
  }

  /** One pass: the oldest pending rows, sent in one call and deleted, in one transaction. */
  async #pass(): Promise<PassResult> {
    let failure: unknown;
    const result = await this.#db.transaction().execute(async (trx): Promise<PassResult> => {
      const lock = await sql<{
        locked: boolean;
      }>`select pg_try_advisory_xact_lock(${this.#lockKey}) as locked`.execute(trx);
      if (!lock.rows[0]?.locked) return 'busy';
      const rows = await trx
        .selectFrom('audit_outbox')
        .selectAll()
        .where('failed_at', 'is', null)
        .orderBy('id')
        .limit(this.#batchSize)
        .forUpdate()
        .skipLocked()
        .execute();
      if (rows.length === 0) {
        this.#metrics?.pending.set(0);
        return 'idle';
      }
      const delivered: string[] = [];
      try {
        await this.#send(rows);
        delivered.push(...rows.map((r) => r.id));
      } catch (err) {
        const code = toAppError(err).code;
        if (!PERMANENT_CODES.has(code)) {
          failure = err;
          await trx
            .updateTable('audit_outbox')
            .set((eb) => ({
              attempts: eb('attempts', '+', 1),
              last_error: lastError(err),
            }))
            .where(
              'id',
              'in',
              rows.map((r) => r.id),
            )
            .execute();
          return 'failed';
        }
        // One of them is refused for good: send them one by one, setting aside the refused ones.
        for (const row of rows) {
          try {
            await this.#send([row]);
            delivered.push(row.id);
          } catch (single) {
            if (!PERMANENT_CODES.has(toAppError(single).code)) {
              failure = single;
              break;
            }
            this.#metrics?.setAside.inc();
            this.#logger.error(
              { source: this.#source, eventId: row.id, action: row.action, err: errorSummary(single) },
              'audit outbox: admin refused an event as invalid; it is kept with failed_at and not sent again',
            );
            await trx
              .updateTable('audit_outbox')
              .set({ failed_at: new Date(), last_error: lastError(single) })
              .where('id', '=', row.id)
              .execute();
          }
        }
      }
      if (delivered.length) {
        await trx.deleteFrom('audit_outbox').where('id', 'in', delivered).execute();
        this.#metrics?.delivered.inc(delivered.length);
      }
      if (failure) return 'failed';
      if (this.#metrics) {
        const left = await trx
          .selectFrom('audit_outbox')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('failed_at', 'is', null)
          .executeTakeFirstOrThrow();
        this.#metrics.pending.set(Number(left.n));
      }
      return rows.length === this.#batchSize ? 'more' : 'idle';
    });
    if (result === 'failed') this.#failed(failure);
    return result;
  }

  async #send(rows: AuditOutboxTable[]): Promise<void> {
    const now = new Date();
    await this.#admin.recordAuditEvents(
      { source: this.#source, events: rows.map((row) => deliveredMessage(row, now)) },
      { deadline: new Date(Date.now() + this.#callTimeoutMs) },
    );
  }
}

/** What a failed delivery leaves on its rows: the error's code and message (admin's or gRPC's). */
function lastError(err: unknown): string {
  const failure = toAppError(err);
  const message = err instanceof Error ? err.message : String(err);
  return `${failure.code}: ${message}`.slice(0, 500);
}
