/**
 * API keys: format, modes, scopes and names. Pure.
 *
 * A key is `svc_live_` or `svc_test_` followed by 64 lowercase hex characters (32 random
 * bytes). Only its SHA-256 is stored; the first 13 characters (prefix + 4 hex) and the last
 * four are kept so people can recognise a key in a list without it being recoverable.
 */
import { randomBytes } from 'node:crypto';
import {
  CREDENTIAL_SCOPES,
  type CredentialScope,
  DEFAULT_KEY_MODE,
  isCredentialScope,
  isKeyMode,
  KEY_MODE_NAMES,
  type KeyMode,
} from '@relayplane/contract/contract';
import { hashToken } from '@relayplane/contract/tokens';
import { type Checked, fail, ok } from './validation.ts';

const API_KEY_NAME_MAX_LENGTH = 64;
/** `svc_live_` + 4 hex: enough to tell keys apart, far too little to guess one. */
const API_KEY_DISPLAY_PREFIX_LENGTH = 13;

const API_KEY_PATTERN = /^svc_(live|test)_[0-9a-f]{64}$/;
const KEY_HASH_PATTERN = /^[0-9a-f]{64}$/;
// Control, format, unassigned and private-use code points.
const UNPRINTABLE = /\p{C}/u;

export interface NewApiKeySecret {
  /** The raw key: handed to the caller once, never stored. */
  key: string;
  /** sha256(key), hex: what is stored and looked up. */
  keyHash: string;
  displayPrefix: string;
  lastFour: string;
}

export function generateApiKey(mode: KeyMode): NewApiKeySecret {
  const key = `svc_${mode}_${randomBytes(32).toString('hex')}`;
  return {
    key,
    keyHash: hashToken(key),
    displayPrefix: key.slice(0, API_KEY_DISPLAY_PREFIX_LENGTH),
    lastFour: key.slice(-4),
  };
}

/** True for a well-formed API key (the gateway checks this before hashing and calling VerifyApiKey). */
export function isApiKey(value: string): boolean {
  return API_KEY_PATTERN.test(value);
}

/** True for a lowercase hex SHA-256, the only thing VerifyApiKey accepts. */
export function isKeyHash(value: string): boolean {
  return KEY_HASH_PATTERN.test(value);
}

/** An empty mode means live. */
export function checkApiKeyMode(raw: string): Checked<KeyMode> {
  if (raw === '') return ok(DEFAULT_KEY_MODE);
  if (isKeyMode(raw)) return ok(raw);
  return fail(`mode must be one of ${KEY_MODE_NAMES.join(', ')}`);
}

/** No scopes means every scope; duplicates are dropped and the result is sorted. */
export function checkApiKeyScopes(raw: readonly string[]): Checked<CredentialScope[]> {
  if (raw.length === 0) return ok([...CREDENTIAL_SCOPES].sort());
  const unknown = raw.find((s) => !isCredentialScope(s));
  if (unknown !== undefined) {
    return fail(`unknown scope "${unknown}"; known scopes are ${CREDENTIAL_SCOPES.join(', ')}`);
  }
  return ok([...new Set(raw as readonly CredentialScope[])].sort());
}

/** Optional label: trimmed, at most 64 printable characters; empty is allowed. */
export function checkApiKeyName(raw: string): Checked<string> {
  const name = raw.trim();
  if ([...name].length > API_KEY_NAME_MAX_LENGTH) {
    return fail(`name must be at most ${API_KEY_NAME_MAX_LENGTH} characters`);
  }
  if (UNPRINTABLE.test(name)) return fail('name must contain only printable characters');
  return ok(name);
}
