/**
 * The checks of a credential request (`POST /api/v1/credentials`) the gateway makes before the
 * issuer counts a connection slot. Pure: each answers the value or the refusal (its error code
 * and a message safe to show); the route throws it.
 *
 * Two steps, because the plan is needed only for the TTL: a request with a bad scope is refused
 * without asking billing for the plan.
 */
import {
  CREDENTIAL_SCOPES,
  CREDENTIAL_TTL_SECONDS,
  type CredentialScope,
  DEFAULT_CREDENTIAL_SCOPES,
  isCredentialScope,
} from '@relayplane/shared/contract';
import type { ErrorCode } from '@relayplane/shared/errors';

export type Checked<T> =
  | { ok: true; value: T }
  | { ok: false; code: Extract<ErrorCode, 'invalid_request' | 'forbidden'>; message: string };

const ok = <T>(value: T): Checked<T> => ({ ok: true, value });

/**
 * The credential's scopes: the requested ones without repeats (default: the session scope),
 * each known (else 400) and granted to the API key (else 403), checked in the order requested.
 */
export function credentialScopes(
  requested: readonly string[] | undefined,
  granted: readonly string[],
): Checked<CredentialScope[]> {
  const scopes = [...new Set(requested ?? DEFAULT_CREDENTIAL_SCOPES)];
  for (const scope of scopes) {
    if (!isCredentialScope(scope)) {
      return {
        ok: false,
        code: 'invalid_request',
        message: `unknown scope "${scope}" (known: ${CREDENTIAL_SCOPES.join(', ')})`,
      };
    }
    if (!granted.includes(scope)) {
      return { ok: false, code: 'forbidden', message: `scope "${scope}" is not granted to this API key` };
    }
  }
  return ok(scopes as CredentialScope[]);
}

/** What of the tenant's plan bounds a credential's TTL (the gateway's cached entitlements). */
export interface TtlPlan {
  planName: string;
  maxCredentialTtlSeconds: number;
}

/**
 * The credential's TTL in seconds: the requested one, an integer within
 * `CREDENTIAL_TTL_SECONDS` and at most the plan's maximum (else 400); by default
 * `CREDENTIAL_TTL_SECONDS.default`, lowered to the plan's maximum when that is less.
 */
export function credentialTtl(requested: number | undefined, plan: TtlPlan): Checked<number> {
  const { min, max } = CREDENTIAL_TTL_SECONDS;
  // The route's schema refuses these first; this keeps the function whole for any other caller.
  if (requested !== undefined && (!Number.isInteger(requested) || requested < min || requested > max)) {
    return {
      ok: false,
      code: 'invalid_request',
      message: `ttl_seconds must be an integer from ${min} to ${max}`,
    };
  }
  const ttl = requested ?? Math.min(CREDENTIAL_TTL_SECONDS.default, plan.maxCredentialTtlSeconds);
  if (ttl > plan.maxCredentialTtlSeconds) {
    return {
      ok: false,
      code: 'invalid_request',
      message: `ttl_seconds ${ttl} exceeds the ${plan.planName} plan's maximum of ${plan.maxCredentialTtlSeconds}`,
    };
  }
  return ok(ttl);
}
