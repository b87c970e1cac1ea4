/**
 * An audit event delivered from another service's outbox (RecordAuditEvents), checked with the
 * same rules enqueueAuditEvent applied before the outbox row was written.
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { auditEventProblem, isAuditEventId } from '@relayplane/contract/audit-event';
import { AppError } from '@relayplane/contract/errors';
import type { AuditEvent } from '@relayplane/proto/admin';
import type { JsonValue, Unchained } from './canonical.ts';

/** An event from an outbox, checked: invalid_request naming what is wrong. */
export function deliveredEvent(event: AuditEvent): Unchained {
  const bad = (what: string) => new AppError('invalid_request', `event ${event.id || '(no id)'}: ${what}`);
  if (!isAuditEventId(event.id)) throw bad('id must be a lowercase UUID');
  if (!event.occurredAt) throw bad('occurred_at is required');
  if (!event.actor) throw bad('actor.type is not an actor type');
  if (!event.target) throw bad('target.type is required');
  let details: unknown;
  try {
    details = event.detailsJson === '' ? {} : JSON.parse(event.detailsJson);
  } catch {
    throw bad('details_json is not JSON');
  }
  // The same checks as enqueueAuditEvent made before the outbox row was written.
  const problem = auditEventProblem({
    action: event.action,
    actor: event.actor,
    target: event.target,
    outcome: event.outcome,
    details,
  });
  if (problem) throw bad(problem);
  // The canonical form has millisecond precision (as PostgreSQL hands it back to JavaScript).
  const occurredAt = new Date(Math.floor(timestampDate(event.occurredAt).getTime()));
  if (Number.isNaN(occurredAt.getTime())) throw bad('occurred_at is not a time');
  return {
    id: event.id,
    occurredAt,
    tenantId: event.tenantId === '' ? null : event.tenantId,
    actor: { type: event.actor.type, id: event.actor.id },
    action: event.action,
    target: { type: event.target.type, id: event.target.id },
    outcome: event.outcome,
    ip: event.ip === '' ? null : event.ip,
    userAgent: event.userAgent === '' ? null : event.userAgent,
    requestId: event.requestId === '' ? null : event.requestId,
    details: details as { [key: string]: JsonValue },
  };
}
