/**
 * The one decision of what a credential request gets (`POST /api/v1/credentials`): its scopes,
 * its lifetime, its region, and the connection cap it is counted against. Pure, no I/O.
 *
 * Billing decides a tenant's policy and words its refusals (GetEntitlements); the gateway reads
 * it once (`issuancePolicyOf`), decides here to refuse a bad request early (400/403, before a
 * slot is counted), and sends the policy along with the request (IssueCredentialRequest.policy);
 * the issuer decides here again, as the authority, and refuses at the cap with the policy's own
 * words. Nobody makes up a limit or a message of their own (entitlements.ts).
 */
import {
  CREDENTIAL_SCOPES,
  CREDENTIAL_TTL_SECONDS,
  type CredentialScope,
  DEFAULT_CREDENTIAL_SCOPES,
  isCredentialScope,
} from './contract.ts';
import { type EntitlementsAnswer, entitlementOf } from './entitlements.ts';
import { AppError, type ErrorCode } from './errors.ts';

/** One limit of the policy: its value and billing's message for a request over it. */
export interface PolicyLimit {
  value: number;
  exceededMessage: string;
}

/** What of a tenant's plan bounds issuance (billing's GetEntitlements, carried to the issuer). */
export interface IssuancePolicy {
  /** The plan's id (`free`, `pro`, …). */
  planId: string;
  maxConcurrentConnections: PolicyLimit;
  maxCredentialTtlSeconds: PolicyLimit;
  /** The plan's relay-session cadence in seconds; 0 or absent: the issuer's default. */
  relaySessionRevalidateSeconds?: number;
}

/** A credential request as asked. */
export interface IssuanceRequest {
  /** Undefined or empty: `DEFAULT_CREDENTIAL_SCOPES`. */
  scopes?: readonly string[] | undefined;
  /** Undefined or 0: the default (`CREDENTIAL_TTL_SECONDS.default`, lowered to the plan's maximum). */
  ttlSeconds?: number | undefined;
  /**
   * The scopes the asking API key holds; each requested scope must be one (else 403).
   * Undefined: not checked here (the issuer, which the gateway calls only for a checked key).
   */
  grantedScopes?: readonly string[] | undefined;
}

/** What the request gets. */
export interface IssuanceGrant {
  /** The requested scopes, once each, in the order asked. */
  scopes: CredentialScope[];
  ttlSeconds: number;
  /** The tenant's concurrent-connection cap this credential is counted against. */
  cap: number;
}

export type IssuanceDecision =
  | { ok: true; grant: IssuanceGrant }
  | { ok: false; code: Extract<ErrorCode, 'invalid_request' | 'forbidden'>; message: string };

/**
 * Decides a request against `policy`. Refusals, in this order: an unknown scope (400) or one the
 * key does not hold (403), the first failing in the order asked; a `ttl_seconds` outside the
 * contract's bounds (400); one over the plan's maximum (400, billing's message).
 */
export function decideIssuance(request: IssuanceRequest, policy: IssuancePolicy): IssuanceDecision {
  const asked = request.scopes?.length ? request.scopes : DEFAULT_CREDENTIAL_SCOPES;
  const scopes = [...new Set(asked)];
  for (const scope of scopes) {
    if (!isCredentialScope(scope)) {
      return refuse(
        'invalid_request',
        `unknown scope "${scope.slice(0, 64)}" (known: ${CREDENTIAL_SCOPES.join(', ')})`,
      );
    }
    if (request.grantedScopes && !request.grantedScopes.includes(scope)) {
      return refuse('forbidden', `scope "${scope}" is not granted to this API key`);
    }
  }
  const { min, max } = CREDENTIAL_TTL_SECONDS;
  const planMax = policy.maxCredentialTtlSeconds.value;
  const asksTtl = request.ttlSeconds !== undefined && request.ttlSeconds !== 0;
  const ttlSeconds = asksTtl
    ? (request.ttlSeconds as number)
    : Math.min(CREDENTIAL_TTL_SECONDS.default, planMax);
  if (asksTtl && (!Number.isInteger(ttlSeconds) || ttlSeconds < min || ttlSeconds > max)) {
    return refuse('invalid_request', `ttl_seconds must be between ${min} and ${max}`);
  }
  if (ttlSeconds > planMax) return refuse('invalid_request', policy.maxCredentialTtlSeconds.exceededMessage);
  return {
    ok: true,
    grant: { scopes: scopes as CredentialScope[], ttlSeconds, cap: policy.maxConcurrentConnections.value },
  };
}

/** The refusal of a request at the policy's connection cap (402, billing's message). */
export function capReached(policy: IssuancePolicy): AppError {
  return new AppError('payment_required', policy.maxConcurrentConnections.exceededMessage);
}

/** The issuance policy of a GetEntitlements answer; a limit missing from it is billing's fault (500). */
export function issuancePolicyOf(answer: EntitlementsAnswer): IssuancePolicy {
  const limit = (name: 'max_concurrent_connections' | 'max_credential_ttl_seconds'): PolicyLimit => {
    const gate = entitlementOf(answer, name);
    return { value: gate.value, exceededMessage: gate.exceeded().message };
  };
  return {
    planId: answer.planId,
    maxConcurrentConnections: limit('max_concurrent_connections'),
    maxCredentialTtlSeconds: limit('max_credential_ttl_seconds'),
    relaySessionRevalidateSeconds: answer.relaySessionRevalidateSeconds ?? 0,
  };
}

/**
 * A policy received over the wire (IssueCredentialRequest.policy) that can be decided with, or
 * why not: every value a non-negative integer and every message present.
 */
export function checkPolicy(policy: IssuancePolicy): string | undefined {
  for (const [name, limit] of [
    ['max_concurrent_connections', policy.maxConcurrentConnections],
    ['max_credential_ttl_seconds', policy.maxCredentialTtlSeconds],
  ] as const) {
    if (!Number.isInteger(limit.value) || limit.value < 0)
      return `policy.${name} must be a whole number, 0 or more`;
    if (!limit.exceededMessage) return `policy.${name} needs its exceeded message`;
  }
  const cadence = policy.relaySessionRevalidateSeconds ?? 0;
  if (!Number.isInteger(cadence) || cadence < 0 || cadence > 3_600)
    return 'policy.relay_session_revalidate_seconds must be a whole number of seconds, 0..3600 (0: the default)';
  return undefined;
}

function refuse(code: 'invalid_request' | 'forbidden', message: string): IssuanceDecision {
  return { ok: false, code, message };
}
