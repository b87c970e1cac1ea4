/**
 * OAuth 2.0 Device Authorization Grant (RFC 8628): codes and the polling decision. Pure.
 *
 * Brute force of user codes (RFC 8628 §5.1): 8 characters from 20 give 20^8 ≈ 2.56e10 codes
 * (34.5 bits), and a guess hits with probability (codes pending) / 2.56e10. A guess needs a
 * logged-in user and is counted per user and per client IP, found or not (defaults: 20 per
 * user and 60 per IP per 15 minutes, config.ts): at most 1,920 guesses per account a day.
 * With 100 codes pending at any moment, one account hits with probability 7.5e-6 a day; an
 * attacker with 1,000 accounts on 1,000 IPs (1.9 million guesses a day) 0.75 %. Codes live
 * 10 minutes, and a hit yields no access to anything of the victim's: at worst the attacker
 * approves a stranger's pending device into the attacker's own account, or denies it.
 */
import { createHash, randomBytes } from 'node:crypto';

/** RFC 8628 §6.1: consonants only (no vowels: no words; no digits: no 0/O, 1/I confusion). */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const USER_CODE_LENGTH = 8;
/** RFC 8628 §3.5: each slow_down adds 5 seconds to the polling interval. */
const SLOW_DOWN_INCREMENT_SECONDS = 5;
/**
 * A poll that arrives this much earlier than the interval still counts as on time: admin
 * replicas' clocks and the network differ by that much, and a client waiting exactly the
 * interval must never be told to slow down.
 */
const POLL_TOLERANCE_MS = 500;
const SCOPE_MAX_LENGTH = 512;

export type DeviceGrantStatus = 'pending' | 'approved' | 'denied' | 'consumed';

/**
 * A user code, `XXXX-XXXX`. Rejection sampling keeps every character equally likely
 * (256 is not a multiple of 20: bytes ≥ 240 are dropped).
 */
export function newUserCode(random: (size: number) => Buffer = randomBytes): string {
  const limit = 256 - (256 % USER_CODE_ALPHABET.length);
  let out = '';
  while (out.length < USER_CODE_LENGTH) {
    for (const b of random(USER_CODE_LENGTH * 2)) {
      if (b >= limit) continue;
      out += USER_CODE_ALPHABET[b % USER_CODE_ALPHABET.length];
      if (out.length === USER_CODE_LENGTH) break;
    }
  }
  return formatUserCode(out);
}

function formatUserCode(chars: string): string {
  return `${chars.slice(0, 4)}-${chars.slice(4)}`;
}

/**
 * What a user typed → the canonical `XXXX-XXXX`, or undefined when it cannot be a user code.
 * Case, spaces and dashes (ASCII and the Unicode ones phones and word processors insert) do
 * not matter.
 */
export function normaliseUserCode(input: string): string | undefined {
  if (input.length > 64) return undefined;
  const chars = input.toUpperCase().replace(/[\s\-\u2010-\u2015\u2212]/g, '');
  if (chars.length !== USER_CODE_LENGTH) return undefined;
  for (const c of chars) if (!USER_CODE_ALPHABET.includes(c)) return undefined;
  return formatUserCode(chars);
}

/** A device code: 256 random bits, base64url (43 characters). */
export function newDeviceCode(): string {
  return randomBytes(32).toString('base64url');
}

/** What is stored instead of a device code or a (normalised) user code. */
export function hashCode(code: string): string {
  return createHash('sha256').update(code).digest('hex');
}

/** RFC 6749 §3.3 scope: space-separated tokens of printable ASCII except `"` and `\`. */
export function isValidScope(scope: string): boolean {
  if (scope.length > SCOPE_MAX_LENGTH) return false;
  if (scope === '') return true;
  return scope.split(' ').every((token) => /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(token));
}

/** What a poll sees of its grant. */
export interface PolledGrant {
  status: DeviceGrantStatus;
  expiresAt: Date;
  intervalSeconds: number;
  lastPolledAt: Date | null;
  /**
   * An approved grant: whether the session that approved it is still live under the user's
   * current credentials epoch (and the grant's epoch is the user's). False: the approval is void.
   */
  approverLive?: boolean;
}

export type PollOutcome =
  | 'issue'
  | 'authorization_pending'
  | 'slow_down'
  | 'access_denied'
  | 'expired_token'
  | 'invalid_grant';

export interface PollDecision {
  outcome: PollOutcome;
  /** The grant's interval after this poll (grown by a slow_down). */
  intervalSeconds: number;
}

/**
 * One poll of the token endpoint (RFC 8628 §3.5). Expiry wins over everything; an approved
 * grant answers its token once (then it is consumed: invalid_grant), and only while the session
 * that approved it is live (else access_denied: a password change or "sign out everywhere" since,
 * or that session ended, voids the approval); a pending grant polled
 * sooner than its interval answers slow_down and its interval grows by 5 seconds.
 */
export function decidePoll(grant: PolledGrant, now: Date): PollDecision {
  const same = (outcome: PollOutcome): PollDecision => ({ outcome, intervalSeconds: grant.intervalSeconds });
  if (grant.status === 'consumed') return same('invalid_grant');
  if (grant.expiresAt.getTime() <= now.getTime()) return same('expired_token');
  if (grant.status === 'denied') return same('access_denied');
  if (grant.status === 'approved') return same(grant.approverLive === false ? 'access_denied' : 'issue');
  const tooSoon =
    grant.lastPolledAt !== null &&
    now.getTime() - grant.lastPolledAt.getTime() < grant.intervalSeconds * 1000 - POLL_TOLERANCE_MS;
  if (tooSoon) {
    return { outcome: 'slow_down', intervalSeconds: grant.intervalSeconds + SLOW_DOWN_INCREMENT_SECONDS };
  }
  return same('authorization_pending');
}
