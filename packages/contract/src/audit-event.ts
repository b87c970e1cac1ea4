/**
 * What an audit event must be to enter the trail (docs/audit.md), checked in one place by every
 * writer: admin before it appends (its own events and those RecordAuditEvents receives), and
 * issuer and billing before they write an outbox row (`enqueueAuditEvent`). An event admin would
 * refuse on delivery is refused with its change instead, so "audit or refuse" holds across
 * services: nothing commits whose event cannot be recorded, and a secret is never written to an
 * outbox row, a log line or the trail. Pure.
 */
import { AUDIT_ACTION_PATTERN, AUDIT_ACTOR_TYPES, AUDIT_OUTCOMES } from './contract.ts';

export type AuditJsonValue =
  | string
  | number
  | boolean
  | null
  | AuditJsonValue[]
  | { [key: string]: AuditJsonValue };

/** The fields of an event the trail checks (ids, times and the request's origin are filled in by the writer). */
export interface CheckedAuditFields {
  action: string;
  actor: { type: string; id: string };
  target: { type: string; id: string };
  outcome: string;
  details: unknown;
}

const ACTOR_TYPES: ReadonlySet<string> = new Set(AUDIT_ACTOR_TYPES);
const OUTCOMES: ReadonlySet<string> = new Set(AUDIT_OUTCOMES);

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** An event id: a UUID (version 7 when we make it: time-ordered). Lowercase only. */
export function isAuditEventId(value: string): boolean {
  return UUID_PATTERN.test(value);
}

/** Bearer tokens (`rp?_` + 72 hex) and API keys (`svc_live_`/`svc_test_` + 64 hex), anywhere in a string. */
const SECRET_PATTERN = /rp[uibcrm]_[0-9a-f]{16}|svc_(?:live|test)_[0-9a-f]{16}/;

/**
 * The first path in `details` whose string (or key) looks like a secret we hand out, or
 * undefined. Events never carry secrets: an event that would is refused, not recorded.
 */
export function secretIn(value: AuditJsonValue, path = 'details'): string | undefined {
  if (typeof value === 'string') return SECRET_PATTERN.test(value) ? path : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const found = secretIn(v, `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  for (const [k, v] of Object.entries(value)) {
    if (SECRET_PATTERN.test(k)) return path;
    const found = secretIn(v, `${path}.${k}`);
    if (found) return found;
  }
  return undefined;
}

/**
 * What is wrong with an event, as a phrase (`action must be <resource>.<verb>`), or undefined
 * when the trail accepts it: an action of the form `<resource>.<verb>`, a known actor type and
 * outcome, a target type, details a JSON object without anything that looks like a token or a
 * key. The message never repeats the secret it found, only where it is.
 */
export function auditEventProblem(event: CheckedAuditFields): string | undefined {
  if (!AUDIT_ACTION_PATTERN.test(event.action)) return 'action must be <resource>.<verb>';
  if (!ACTOR_TYPES.has(event.actor.type)) return 'actor.type is not an actor type';
  if (event.target.type === '') return 'target.type is required';
  if (!OUTCOMES.has(event.outcome)) return 'outcome must be success, failure or denied';
  const details = event.details;
  if (typeof details !== 'object' || details === null || Array.isArray(details)) {
    return 'details must be a JSON object';
  }
  const secret = secretIn(details as AuditJsonValue);
  if (secret) return `details carry a secret at ${secret}`;
  return undefined;
}
