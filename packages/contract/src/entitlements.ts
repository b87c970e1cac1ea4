/**
 * Reading billing's entitlement decisions at a gate. Billing (GetEntitlements) decides each
 * limit's value, the error code and the message; gates count, compare and throw what billing
 * decided — they never make up a limit, a status or a message of their own.
 */
import { AppError, isErrorCode } from './errors.ts';

/** The limit names GetEntitlements answers (as in the plans file). */
export const ENTITLEMENT_LIMITS = [
  'max_concurrent_connections',
  'max_api_keys',
  'max_projects',
  'max_bots',
  'max_allowlist_entries',
  'max_webhook_endpoints',
  'max_credential_ttl_seconds',
  // A rate, not a count: enforced by the gateway at issuance (429 + Retry-After), per API key.
  'max_issuance_per_second_per_key',
] as const;
export type EntitlementLimit = (typeof ENTITLEMENT_LIMITS)[number];

/** The part of a GetEntitlements answer a gate reads (structurally the generated message). */
export interface EntitlementsAnswer {
  planId: string;
  entitlements: readonly { limit: string; value: number; exceededCode: string; exceededMessage: string }[];
  /** The plan's relay-session cadence in seconds; 0 or absent (a billing from before it): the issuer's default. */
  relaySessionRevalidateSeconds?: number;
}

export interface GateLimit {
  value: number;
  /**
   * The error to throw when a request would exceed the limit; a rate limit passes how long to
   * wait (the gateway answers it as `Retry-After`).
   */
  exceeded(options?: { retryAfterSeconds?: number }): AppError;
}

/** One limit of a GetEntitlements answer; a missing limit is billing's fault (internal). */
export function entitlementOf(answer: EntitlementsAnswer, limit: EntitlementLimit): GateLimit {
  const entry = answer.entitlements.find((e) => e.limit === limit);
  if (!entry || !isErrorCode(entry.exceededCode)) {
    throw new AppError('internal', `billing answered no usable ${limit} entitlement`);
  }
  const code = entry.exceededCode;
  return {
    value: entry.value,
    exceeded: (options) => new AppError(code, entry.exceededMessage, options),
  };
}
