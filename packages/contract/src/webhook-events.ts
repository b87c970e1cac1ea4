/**
 * The webhook events a project's endpoints may subscribe to (issue 34): their names, the
 * envelope every delivery carries, and the subject each is ordered by. Pure.
 *
 * Ordering is per subject: one session's `session.started` before its `session.ended`, one API
 * key's events in order, one tenant's plan changes in order; different subjects (and different
 * endpoints) never wait for each other.
 */
import { isId } from './ids.ts';

export const WEBHOOK_EVENT_TYPES = [
  'session.started',
  'session.ended',
  'session.refused',
  'credential.revoked',
  'credentials.bulk_revoked',
  'api_key.created',
  'api_key.revoked',
  'cap.reached',
  'plan.changed',
  'signing_key.rotated',
  'signing_key.revoked',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export function isWebhookEventType(value: string): value is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

/** What an event is about, for ordering: its kind and id (deliveries of one subject go in order). */
export type WebhookSubject =
  | { kind: 'session'; id: string }
  | { kind: 'credential'; id: string }
  | { kind: 'api_key'; id: string }
  | { kind: 'project'; id: string }
  | { kind: 'tenant'; id: string }
  | { kind: 'signing_key'; id: string };

/** The subject kind each event type is ordered by. */
export const WEBHOOK_SUBJECT_OF: Record<WebhookEventType, WebhookSubject['kind']> = {
  'session.started': 'session',
  'session.ended': 'session',
  // Refusals carry no session (none was admitted): ordered with the project's other refusals.
  'session.refused': 'project',
  'credential.revoked': 'credential',
  'credentials.bulk_revoked': 'project',
  'api_key.created': 'api_key',
  'api_key.revoked': 'api_key',
  'cap.reached': 'tenant',
  'plan.changed': 'tenant',
  // Platform-wide facts: every project of every tenant hears of them, in the key's order.
  'signing_key.rotated': 'signing_key',
  'signing_key.revoked': 'signing_key',
};

/** The ordering key of a subject (`<kind>:<id>`): one queue of deliveries per endpoint and key. */
export function subjectKey(subject: WebhookSubject): string {
  return `${subject.kind}:${subject.id}`;
}

/**
 * What every delivery's body is: `id` (also the `webhook-id` header, the same on every retry),
 * `type`, `timestamp` (when the fact happened, RFC 3339), and `data` with the tenant and project
 * ids and the event's own fields. Never a secret: no credential, key or token value.
 */
export interface WebhookEnvelope<D extends Record<string, unknown> = Record<string, unknown>> {
  id: string;
  type: WebhookEventType;
  timestamp: string;
  data: D & { tenant_id: string; project_id: string | null };
}

/** Field names an event's data must never carry (values that authenticate). */
const SECRET_FIELDS = /(^|_)(token|secret|password|key_value|jwt|authorization)$/;

/** Why `envelope` is not one to send, or undefined: a known type, an id, a time, no secret field. */
export function envelopeProblem(envelope: WebhookEnvelope): string | undefined {
  if (!isWebhookEventType(envelope.type)) return `unknown event type ${JSON.stringify(envelope.type)}`;
  if (!isId('webhookMessage', envelope.id)) return 'id must be a message id (msg_…)';
  if (Number.isNaN(Date.parse(envelope.timestamp))) return 'timestamp must be an RFC 3339 time';
  if (!envelope.data.tenant_id) return 'data.tenant_id is required';
  const walk = (value: unknown, path: string): string | undefined => {
    if (value === null || typeof value !== 'object') return undefined;
    for (const [k, v] of Object.entries(value)) {
      if (SECRET_FIELDS.test(k)) return `${path}.${k} looks like a secret; events never carry one`;
      const deeper = walk(v, `${path}.${k}`);
      if (deeper) return deeper;
    }
    return undefined;
  };
  return walk(envelope.data, 'data');
}
