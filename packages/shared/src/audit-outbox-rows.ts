/**
 * The audit outbox's rows (audit-outbox.ts): the table each service's migration creates, how an
 * event is written into it inside the caller's transaction, and how a row travels to admin.
 */
import { randomBytes } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { auditEventProblem } from '@relayplane/contract/audit-event';
import {
  AUDIT_DELIVERY_MAX_SKEW_SECONDS,
  type AuditAction,
  type AuditOutcome,
} from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { AuditEventSchema } from '@relayplane/proto/admin';
import type { Kysely } from 'kysely';
import { type AuditActorRef, currentRequestContext } from './request-context.ts';

/** The `audit_outbox` table, as each service's migration creates it. */
export interface AuditOutboxTable {
  /** UUIDv7: time-ordered, assigned when the row is written; admin's event id. */
  id: string;
  occurred_at: Date;
  /** Null: not tied to a tenant (relays, signing keys). */
  tenant_id: string | null;
  actor_type: string;
  actor_id: string;
  action: string;
  target_type: string;
  target_id: string;
  outcome: string;
  ip: string;
  user_agent: string;
  request_id: string;
  /** jsonb, written as JSON text. */
  details: unknown;
  /** Failed deliveries so far (observability only). */
  attempts: number;
  last_error: string | null;
  /** Set when admin refused the event as invalid: kept, no longer delivered. */
  failed_at: Date | null;
}

/** What a service's kysely schema must contain for the outbox. */
export interface AuditOutboxDatabase {
  audit_outbox: AuditOutboxTable;
}

/**
 * A kysely transaction (or connection) of a schema that has `audit_outbox` (its
 * `AuditOutboxDatabase` part). Typed loosely: kysely cannot infer a subset schema from a
 * `Transaction<ServiceDatabase>`.
 */
// biome-ignore lint/suspicious/noExplicitAny: any service schema with the audit_outbox table
export type OutboxTransaction = Kysely<any>;

/** One event to record (docs/audit.md lists the actions, their targets and details). */
export interface AuditEventInput {
  action: AuditAction;
  /** Null: not tied to a tenant. */
  tenantId: string | null;
  target: { type: string; id: string };
  /** Default `success`. */
  outcome?: AuditOutcome;
  /** A JSON object; never a secret (token, password, key material). */
  details?: Record<string, unknown>;
  /** Default: the request's actor (`x-actor`), else anonymous. */
  actor?: AuditActorRef;
  /** Default: now. */
  occurredAt?: Date;
}

/** The actor of work a service does on its own (a scheduled job). */
export function systemActor(job: string): AuditActorRef {
  return { type: 'system', id: job };
}

const ANONYMOUS: AuditActorRef = { type: 'anonymous', id: '' };
export const AUDIT_UNAVAILABLE_MESSAGE =
  'the audit trail cannot be written; nothing was changed, retry shortly';

let lastMs = 0;
let sequence = 0;

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 12-bit counter that keeps ids
 * made in the same millisecond by this process in order, then random bits.
 */
export function newAuditEventId(now = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    sequence = 0;
  } else if (++sequence > 0xfff) {
    // 4 096 ids in one millisecond: borrow the next one (still ordered, still unique).
    lastMs += 1;
    sequence = 0;
  }
  const bytes = randomBytes(16);
  const ms = lastMs;
  bytes[0] = Math.floor(ms / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(ms / 2 ** 32) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | ((sequence >>> 8) & 0x0f);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * Writes `event` to the outbox inside `trx`, the caller's transaction. Throws `unavailable`
 * when the row cannot be written: the caller's transaction then rolls back, changing nothing.
 * Throws `internal` (a programming error), writing nothing, for an event admin would refuse on
 * delivery (`auditEventProblem`: the action's form, the actor type, an empty target type, a
 * secret in details): such an event would otherwise be set aside after its change committed.
 * Answers the event id. Call the deliverer's `kick()` once the transaction committed.
 */
export async function enqueueAuditEvent(trx: OutboxTransaction, event: AuditEventInput): Promise<string> {
  const context = currentRequestContext();
  const actor = event.actor ?? context?.actor ?? ANONYMOUS;
  const outcome = event.outcome ?? 'success';
  const details = event.details ?? {};
  const problem = auditEventProblem({ action: event.action, actor, target: event.target, outcome, details });
  if (problem) throw new AppError('internal', `audit event ${event.action}: ${problem}`);
  const occurredAt = event.occurredAt ?? new Date();
  const id = newAuditEventId(occurredAt.getTime());
  try {
    await (trx as Kysely<AuditOutboxDatabase>)
      .insertInto('audit_outbox')
      .values({
        id,
        occurred_at: occurredAt,
        tenant_id: event.tenantId,
        actor_type: actor.type,
        actor_id: actor.id,
        action: event.action,
        target_type: event.target.type,
        target_id: event.target.id,
        outcome,
        ip: context?.clientIp ?? '',
        user_agent: context?.userAgent ?? '',
        request_id: context?.requestId ?? '',
        details: JSON.stringify(details),
        attempts: 0,
        last_error: null,
        failed_at: null,
      })
      .execute();
  } catch (err) {
    throw new AppError('unavailable', AUDIT_UNAVAILABLE_MESSAGE, { cause: err });
  }
  return id;
}

/**
 * A notice (issue 34): a fact for webhooks only, delivered to admin through the same outbox
 * (so it commits with the change that caused it and is delivered at least once) and never
 * appended to the audit trail. `type` is the webhook event type (NOTICE_SOURCE_TYPES); `data`
 * its fields, never a secret.
 */
export interface NoticeInput {
  type: string;
  tenantId: string;
  /** Null: tenant-wide (every project's endpoints hear of it). */
  projectId: string | null;
  /** What it is ordered by: `session` and its id, `tenant` and its id, `project` and its id. */
  subject: { type: string; id: string };
  data: Record<string, unknown>;
  occurredAt?: Date;
}

export const NOTICE_ACTOR: AuditActorRef = { type: 'system', id: 'notices' };

/** Writes `notice` to the outbox inside `trx` (as enqueueAuditEvent). */
export function enqueueNotice(trx: OutboxTransaction, notice: NoticeInput): Promise<string> {
  return enqueueAuditEvent(trx, {
    action: notice.type as AuditAction,
    tenantId: notice.tenantId,
    target: notice.subject,
    actor: NOTICE_ACTOR,
    details: { project_id: notice.projectId, ...notice.data },
    ...(notice.occurredAt ? { occurredAt: notice.occurredAt } : {}),
  });
}

/**
 * Admin refuses an `occurred_at` more than 5 minutes from its clock (issue 31: no backdating).
 * An event that waited longer in the outbox (admin was down) is delivered stamped with its
 * delivery time, its own time kept as `details.occurred_at_source`: recorded late and saying so,
 * never lost and never backdated. The margin leaves a minute for clocks that disagree.
 */
export const RESTAMP_AFTER_MS = (AUDIT_DELIVERY_MAX_SKEW_SECONDS - 60) * 1000;

export function deliveredMessage(
  row: AuditOutboxTable,
  now: Date,
): MessageInitShape<typeof AuditEventSchema> {
  const message = eventMessage(row);
  if (now.getTime() - row.occurred_at.getTime() <= RESTAMP_AFTER_MS) return message;
  const details = JSON.parse(message.detailsJson ?? '{}') as Record<string, unknown>;
  return {
    ...message,
    occurredAt: timestampFromDate(now),
    detailsJson: JSON.stringify({ ...details, occurred_at_source: row.occurred_at.toISOString() }),
  };
}

/** An outbox row as admin.proto's AuditEvent. */
export function eventMessage(row: AuditOutboxTable): MessageInitShape<typeof AuditEventSchema> {
  return {
    id: row.id,
    occurredAt: timestampFromDate(row.occurred_at),
    tenantId: row.tenant_id ?? '',
    actor: { type: row.actor_type, id: row.actor_id },
    action: row.action,
    target: { type: row.target_type, id: row.target_id },
    outcome: row.outcome,
    ip: row.ip,
    userAgent: row.user_agent,
    requestId: row.request_id,
    detailsJson: typeof row.details === 'string' ? row.details : JSON.stringify(row.details ?? {}),
  };
}
