/**
 * Which webhook event an audit event or a notice is (issue 34, docs/webhooks.md): its type, the
 * project whose endpoints hear of it (null: every project of the tenant; a platform event with
 * no tenant: every tenant's), the subject it is ordered by, and its data. Pure.
 */

import {
  isWebhookEventType,
  subjectKey,
  WEBHOOK_SUBJECT_OF,
  type WebhookEventType,
} from '@relayplane/contract/webhook-events';
import type { JsonValue } from '../audit/canonical.ts';

export interface WebhookFact {
  type: WebhookEventType;
  /** Null: tenant-wide (plan, cap) or platform-wide (signing keys). */
  projectId: string | null;
  /** Null: a platform event; every tenant with a subscribed endpoint gets its own message. */
  tenantId: string | null;
  /** `<kind>:<id>`: deliveries of one subject to one endpoint go in order. */
  subject: string;
  data: Record<string, JsonValue>;
  occurredAt: Date;
}

/** The parts of an audit event (admin's own or delivered) the mapping reads. */
export interface FactSource {
  action: string;
  tenantId: string | null;
  target: { type: string; id: string };
  outcome: string;
  details: Record<string, JsonValue>;
  occurredAt: Date;
}

function str(value: JsonValue | undefined): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/**
 * When the fact happened: an event that waited in an outbox past admin's skew limit arrives
 * restamped, its own time in `details.occurred_at_source` (audit-outbox-rows.ts).
 */
function happenedAt(source: FactSource): Date {
  const original = source.details.occurred_at_source;
  const at = typeof original === 'string' ? new Date(original) : undefined;
  return at && !Number.isNaN(at.getTime()) ? at : source.occurredAt;
}

function fact(
  type: WebhookEventType,
  source: FactSource,
  subjectId: string,
  projectId: string | null,
  data: Record<string, JsonValue>,
): WebhookFact {
  return {
    type,
    projectId,
    tenantId: source.tenantId,
    subject: subjectKey({ kind: WEBHOOK_SUBJECT_OF[type], id: subjectId }),
    data,
    occurredAt: happenedAt(source),
  };
}

/**
 * The webhook events an audit event is (most are none). Revoking the active signing key
 * promotes the next one: that is a rotation too, so it is both `signing_key.revoked` and
 * `signing_key.rotated` (ordered by the revoked key, then by the promoted one).
 */
export function factsOfAuditEvent(e: FactSource): WebhookFact[] {
  const first = factOfAuditEvent(e);
  if (!first) return [];
  const promoted = e.action === 'signing_key.revoke' ? str(e.details.promoted_kid) : null;
  if (!promoted) return [first];
  return [
    first,
    fact('signing_key.rotated', e, promoted, null, { kid: promoted, previous_kid: e.target.id }),
  ];
}

/** The webhook event an audit event is, or undefined (most audit events are none). */
export function factOfAuditEvent(e: FactSource): WebhookFact | undefined {
  if (e.outcome !== 'success') return undefined;
  const d = e.details;
  switch (e.action) {
    case 'api_key.create': {
      const projectId = str(d.project_id);
      if (!projectId || !e.tenantId) return undefined;
      return fact('api_key.created', e, e.target.id, projectId, {
        api_key_id: e.target.id,
        name: d.name ?? null,
        mode: d.mode ?? null,
        scopes: d.scopes ?? [],
        display_prefix: d.display_prefix ?? null,
        last_four: d.last_four ?? null,
      });
    }
    case 'api_key.revoke': {
      const projectId = str(d.project_id);
      // Revoking a revoked key changes nothing: no second event.
      if (!projectId || !e.tenantId || d.already_revoked === true) return undefined;
      return fact('api_key.revoked', e, e.target.id, projectId, { api_key_id: e.target.id });
    }
    case 'credential.revoke': {
      const projectId = str(d.project_id);
      if (!projectId || !e.tenantId) return undefined;
      return fact('credential.revoked', e, e.target.id, projectId, { credential_id: e.target.id });
    }
    case 'credentials.bulk_revoke':
      if (!e.tenantId) return undefined;
      return fact('credentials.bulk_revoked', e, e.target.id, e.target.id, {
        api_key_id: d.api_key_id ?? null,
        issued_before: d.issued_before ?? null,
        revoked: d.revoked ?? 0,
      });
    case 'plan.change':
      if (!e.tenantId) return undefined;
      return fact('plan.changed', e, e.tenantId, null, {
        from: d.from ?? null,
        to: d.to ?? null,
        cause: d.cause ?? null,
      });
    case 'signing_key.rotate': {
      // A maintenance tick that rotated nothing is audited, but is no rotation.
      const kid = str(d.to_kid);
      if (d.rotated !== true || !kid) return undefined;
      return fact('signing_key.rotated', e, kid, null, { kid, previous_kid: d.from_kid ?? null });
    }
    case 'signing_key.revoke':
      return fact('signing_key.revoked', e, e.target.id, null, {
        kid: e.target.id,
        promoted_kid: d.promoted_kid ?? null,
      });
    default:
      return undefined;
  }
}

/**
 * A notice (a fact delivered for webhooks only): the action is the event type, the target its
 * subject, the details its data with `project_id` (null: tenant-wide).
 */
export function factOfNotice(e: FactSource): WebhookFact | undefined {
  if (!isWebhookEventType(e.action) || !e.tenantId) return undefined;
  const { project_id, occurred_at_source: _restamped, ...data } = e.details;
  const projectId = str(project_id);
  return fact(e.action, e, e.target.id, projectId, data);
}
