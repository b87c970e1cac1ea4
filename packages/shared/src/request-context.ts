import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

/** Who a request acts as, for the audit trail (docs/audit.md). */
export interface AuditActorRef {
  type: 'user' | 'bot' | 'identity_token' | 'cli' | 'system' | 'anonymous';
  id: string;
}

/**
 * What travels with a request across await points and gRPC hops. The gateway fills in the
 * client's address and user agent when the request arrives, and the actor once a guard has
 * authenticated it; services read them for audit events and session records.
 */
export interface RequestContext {
  readonly requestId: string;
  clientIp?: string;
  userAgent?: string;
  actor?: AuditActorRef;
  /**
   * Set by the gRPC server for a call whose caller is authenticated: the service the peer is
   * (its mutual-TLS certificate's SPIFFE app, or the in-process caller a composition root named).
   * Unset over plaintext: the peer is unknown. Never read from metadata a network peer sent.
   */
  peerApp?: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

export const REQUEST_ID_METADATA_KEY = 'x-request-id';
export const CLIENT_IP_METADATA_KEY = 'x-client-ip';
export const USER_AGENT_METADATA_KEY = 'x-client-user-agent';
export const ACTOR_METADATA_KEY = 'x-actor';
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
const CLIENT_IP_PATTERN = /^[0-9A-Fa-f.:]{2,45}$/;
const ACTOR_TYPES: ReadonlySet<string> = new Set([
  'user',
  'bot',
  'identity_token',
  'cli',
  'system',
  'anonymous',
]);
const USER_AGENT_MAX = 256;

export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

export function runWithRequestContext<T>(ctx: RequestContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

/** Accepts a caller-supplied request id only when it is short and printable. */
export function requestIdFrom(candidate: unknown): string {
  return typeof candidate === 'string' && REQUEST_ID_PATTERN.test(candidate) ? candidate : randomUUID();
}

/** An IP address as Node reports it (v4, v6, v4-mapped v6), else undefined. */
export function clientIpFrom(candidate: unknown): string | undefined {
  return typeof candidate === 'string' && CLIENT_IP_PATTERN.test(candidate) ? candidate : undefined;
}

/**
 * A user agent as gRPC metadata can carry it: printable ASCII only (anything else becomes
 * `?`), at most 256 characters. Undefined for an absent or empty one.
 */
export function userAgentFrom(candidate: unknown): string | undefined {
  if (typeof candidate !== 'string' || candidate.length === 0) return undefined;
  return candidate.slice(0, USER_AGENT_MAX).replace(/[^\x20-\x7e]/g, '?');
}

/** `type:id` as the gateway sends it in `x-actor`. */
export function actorFrom(candidate: unknown): AuditActorRef | undefined {
  if (typeof candidate !== 'string') return undefined;
  const colon = candidate.indexOf(':');
  const type = colon < 0 ? candidate : candidate.slice(0, colon);
  const id = colon < 0 ? '' : candidate.slice(colon + 1);
  if (!ACTOR_TYPES.has(type) || id.length > 128 || !/^[A-Za-z0-9._-]*$/.test(id)) return undefined;
  return { type: type as AuditActorRef['type'], id };
}

export function actorToMetadata(actor: AuditActorRef): string {
  return `${actor.type}:${actor.id}`;
}
