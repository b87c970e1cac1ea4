/**
 * The audit trail's tamper evidence (docs/audit.md, "The chain"): each event stores the SHA-256
 * of its canonical form, and the canonical form contains the previous event's hash in the same
 * chain (one chain per tenant, one for events without a tenant). A third party recomputes it
 * from the listed fields alone: this file is the whole definition. Pure.
 */
import { createHash, randomBytes } from 'node:crypto';

/** The `prev_hash` of a chain's first event. */
export const GENESIS_HASH = '0'.repeat(64);

/** The chain of events without a tenant (a failed login for an unknown email, …). */
export const PLATFORM_CHAIN = '_platform';

/** Version of the canonical form; part of it, so a future format cannot collide with this one. */
export const CANONICAL_VERSION = 1;

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** An event as stored: every field the hash covers. */
export interface ChainedEvent {
  id: string;
  /** Position in its chain, from 1. */
  seq: number;
  occurredAt: Date;
  tenantId: string | null;
  actor: { type: string; id: string };
  action: string;
  target: { type: string; id: string };
  outcome: string;
  ip: string | null;
  userAgent: string | null;
  requestId: string | null;
  details: { [key: string]: JsonValue };
  prevHash: string;
}

/** An event as stored and listed: chained, with its hash. */
export interface StoredAuditEvent extends ChainedEvent {
  hash: string;
}

/** An event before it joins its chain (no seq, no previous hash yet). */
export type Unchained = Omit<ChainedEvent, 'seq' | 'prevHash'>;

/**
 * JSON with object keys sorted (by UTF-16 code units, as `Array.prototype.sort`), no
 * whitespace, strings and numbers as `JSON.stringify` writes them.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] as JsonValue)}`).join(',')}}`;
}

/** The chain key of a tenant's events (null: the platform chain). */
export function chainKeyOf(tenantId: string | null): string {
  return tenantId ?? PLATFORM_CHAIN;
}

/** The canonical form an event's hash is taken of (docs/audit.md shows an example). */
export function canonicalForm(event: ChainedEvent): string {
  return canonicalJson({
    v: CANONICAL_VERSION,
    id: event.id,
    seq: event.seq,
    occurred_at: event.occurredAt.toISOString(),
    tenant_id: event.tenantId,
    actor: { type: event.actor.type, id: event.actor.id },
    action: event.action,
    target: { type: event.target.type, id: event.target.id },
    outcome: event.outcome,
    ip: event.ip,
    user_agent: event.userAgent,
    request_id: event.requestId,
    details: event.details,
    prev_hash: event.prevHash,
  });
}

/** SHA-256 of the canonical form, lowercase hex. */
export function eventHash(event: ChainedEvent): string {
  return createHash('sha256').update(canonicalForm(event), 'utf8').digest('hex');
}

/** A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits. */
export function newEventId(now: Date): string {
  const bytes = randomBytes(16);
  const ms = BigInt(now.getTime());
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
