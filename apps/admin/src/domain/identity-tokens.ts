/** Identity tokens: scopes and lifetime. Pure. */

import type { RoleName } from '@relayplane/contract/contract';
import { PrincipalKind } from '@relayplane/proto/admin';
import { isPermission, PERMISSIONS, type Permission, permissionsOf } from '@relayplane/shared/iam';
import { type Checked, fail, ok } from './validation.ts';

/** Without `expires_at`: one hour. */
const IDENTITY_TOKEN_DEFAULT_TTL_MS = 60 * 60 * 1000;
/** `expires_at` must lie at least a minute ahead (a token must be usable)… */
const IDENTITY_TOKEN_MIN_TTL_MS = 60 * 1000;
/** …and at most 30 days: long-lived machine access is a bot key, revocable and listed as such. */
const IDENTITY_TOKEN_MAX_TTL_MS = 30 * 24 * 60 * 60 * 1000;
/** `rpi_` + 4 hex: enough to tell tokens apart, far too little to guess one. */
export const IDENTITY_TOKEN_DISPLAY_PREFIX_LENGTH = 8;

/** At least one scope, each a known permission (docs/iam.md); duplicates folded, matrix order. */
export function checkIdentityScopes(scopes: readonly string[]): Checked<Permission[]> {
  if (scopes.length === 0) return fail('scopes must name at least one permission');
  const unknown = scopes.find((s) => !isPermission(s));
  if (unknown !== undefined) return fail(`unknown scope "${unknown}"; scopes are permissions (docs/iam.md)`);
  return ok(PERMISSIONS.filter((p) => scopes.includes(p)));
}

/**
 * The expiry asked for (undefined: the default), within [now + 1 min, now + 30 days], and never
 * after `notAfter` (the calling identity token's own expiry: a token cannot outlive its maker).
 */
export function checkIdentityExpiry(expiresAt: Date | undefined, now: Date, notAfter?: Date): Checked<Date> {
  if (expiresAt === undefined) {
    const fallback = now.getTime() + IDENTITY_TOKEN_DEFAULT_TTL_MS;
    return ok(new Date(notAfter ? Math.min(fallback, notAfter.getTime()) : fallback));
  }
  const ttl = expiresAt.getTime() - now.getTime();
  if (Number.isNaN(ttl)) return fail('expires_at must be a date-time');
  if (ttl < IDENTITY_TOKEN_MIN_TTL_MS) return fail('expires_at must be at least 60 seconds in the future');
  if (ttl > IDENTITY_TOKEN_MAX_TTL_MS) return fail('expires_at must be at most 30 days in the future');
  if (notAfter && expiresAt > notAfter) {
    return fail(
      `expires_at must not be later than the calling identity token's expiry (${notAfter.toISOString()})`,
    );
  }
  return ok(expiresAt);
}

/**
 * What an identity token holds now: its scopes that the role of the user at the root of its
 * creation chain still grants (the identity's role is applied by the IAM decision itself).
 */
export function effectiveScopes(scopes: readonly string[], rootUserRole: RoleName): string[] {
  const held = permissionsOf({ kind: PrincipalKind.USER_SESSION, role: rootUserRole });
  return scopes.filter((s) => held.has(s as Permission));
}
