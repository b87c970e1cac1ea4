/**
 * Input rules for accounts and projects. Pure: each function returns the normalised value
 * or a message safe to show the caller; the transport decides the error code.
 */
import {
  DEFAULT_PROJECT_ENVIRONMENT,
  isProjectEnvironment,
  PROJECT_ENVIRONMENTS,
  type ProjectEnvironment,
} from '@relayplane/contract/contract';

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

export const ok = <T>(value: T): Checked<T> => ({ ok: true, value });
export const fail = <T>(message: string): Checked<T> => ({ ok: false, message });

const EMAIL_MAX_LENGTH = 254;
const PASSWORD_MIN_LENGTH = 12;
const PASSWORD_MAX_LENGTH = 256;
const TENANT_NAME_MAX_LENGTH = 64;
const PROJECT_NAME_MAX_LENGTH = 64;

// Deliberately simple: one @, no whitespace, a dot in the domain. Deliverability is not ours to judge.
const EMAIL_PATTERN = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;
// Control, format, unassigned and private-use code points.
const UNPRINTABLE = /\p{C}/u;

/** Emails are compared case-insensitively: the stored form is trimmed and lowercased. */
export function normaliseEmail(raw: string): string {
  return raw.trim().toLowerCase();
}

export function checkEmail(raw: string): Checked<string> {
  const email = normaliseEmail(raw);
  if (email.length === 0) return fail('email is required');
  if (email.length > EMAIL_MAX_LENGTH) return fail(`email must be at most ${EMAIL_MAX_LENGTH} characters`);
  if (UNPRINTABLE.test(email) || !EMAIL_PATTERN.test(email)) return fail('email is not a valid address');
  return ok(email);
}

/** Passwords are taken as given (no trimming): length is counted in characters. */
export function checkPassword(raw: string): Checked<string> {
  const length = [...raw].length;
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    return fail(`password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters long`);
  }
  return ok(raw);
}

export function checkTenantName(raw: string): Checked<string> {
  const name = raw.trim();
  const length = [...name].length;
  if (length === 0) return fail('tenant_name is required');
  if (length > TENANT_NAME_MAX_LENGTH) {
    return fail(`tenant_name must be at most ${TENANT_NAME_MAX_LENGTH} characters`);
  }
  if (UNPRINTABLE.test(name)) return fail('tenant_name must contain only printable characters');
  return ok(name);
}

const PROJECT_NAME_PATTERN = /^[a-z0-9][a-z0-9-]*$/;

export function checkProjectName(raw: string): Checked<string> {
  if (raw.length === 0) return fail('name is required');
  if (raw.length > PROJECT_NAME_MAX_LENGTH) {
    return fail(`name must be at most ${PROJECT_NAME_MAX_LENGTH} characters`);
  }
  if (!PROJECT_NAME_PATTERN.test(raw)) {
    return fail(
      'name must contain only lowercase letters, digits and hyphens, and start with a letter or digit',
    );
  }
  return ok(raw);
}

/** An empty environment means the default. */
export function checkEnvironment(raw: string): Checked<ProjectEnvironment> {
  if (raw === '') return ok(DEFAULT_PROJECT_ENVIRONMENT);
  if (isProjectEnvironment(raw)) return ok(raw);
  return fail(`environment must be one of ${PROJECT_ENVIRONMENTS.join(', ')}`);
}
