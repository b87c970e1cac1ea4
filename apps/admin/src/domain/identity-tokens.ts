/** Identity tokens: scopes and lifetime. Pure. */
import { isPermission, PERMISSIONS, type Permission } from '@relayplane/shared/iam';
import type { Checked } from './validation.ts';

/** Without `expires_at`: one hour. */
export const IDENTITY_TOKEN_DEFAULT_TTL_MS = 60 * 60 * 1000;
/** `expires_at` must lie at least a minute ahead (a token must be usable)… */
export const IDENTITY_TOKEN_MIN_TTL_MS = 60 * 1000;
/** …and at most 30 days: long-lived machine access is a bot key, revocable and listed as such. */
export const IDENTITY_TOKEN_MAX_TTL_MS = 30 * 24 * 60 * 60 * 1000;
/** `rpi_` + 4 hex: enough to tell tokens apart, far too little to guess one. */
export const IDENTITY_TOKEN_DISPLAY_PREFIX_LENGTH = 8;

const ok = <T>(value: T): Checked<T> => ({ ok: true, value });
const fail = <T>(message: string): Checked<T> => ({ ok: false, message });

/** At least one scope, each a known permission (docs/iam.md); duplicates folded, matrix order. */
export function checkIdentityScopes(scopes: readonly string[]): Checked<Permission[]> {
  if (scopes.length === 0) return fail('scopes must name at least one permission');
  const unknown = scopes.find((s) => !isPermission(s));
  if (unknown !== undefined) return fail(`unknown scope "${unknown}"; scopes are permissions (docs/iam.md)`);
  return ok(PERMISSIONS.filter((p) => scopes.includes(p)));
}

/** The expiry asked for (undefined: the default), within [now + 1 min, now + 30 days]. */
export function checkIdentityExpiry(expiresAt: Date | undefined, now: Date): Checked<Date> {
  if (expiresAt === undefined) return ok(new Date(now.getTime() + IDENTITY_TOKEN_DEFAULT_TTL_MS));
  const ttl = expiresAt.getTime() - now.getTime();
  if (Number.isNaN(ttl)) return fail('expires_at must be a date-time');
  if (ttl < IDENTITY_TOKEN_MIN_TTL_MS) return fail('expires_at must be at least 60 seconds in the future');
  if (ttl > IDENTITY_TOKEN_MAX_TTL_MS) return fail('expires_at must be at most 30 days in the future');
  return ok(expiresAt);
}
