/**
 * Every Redis key the admin service uses, built in one place. The rate limiters prepend the
 * deployment's prefix (`ADMIN_REDIS_PREFIX`); the bus prefixes its channels the same way.
 */
import { createHash } from 'node:crypto';

/** Prefix of the bullmq keys of admin's maintenance queue (audit retention), under the deployment's prefix. */
export const bullPrefix = (prefix: string): string => `${prefix}bull`;

const emailHash = (normalisedEmail: string): string =>
  createHash('sha256').update(normalisedEmail).digest('hex');

/** How `loginAccountIp` names attempts whose client IP is unknown (a caller that sent none). */
export const UNKNOWN_CLIENT_IP = '-';

/**
 * Fixed-window counters of the login, sign-up and device-flow throttles (one string key each,
 * TTL = window). A `clientIp` here is always a throttle client (grpc/limits.ts throttleClientOf:
 * an IPv6 address by its /64), never a raw address.
 */
export const throttleKeys = {
  /**
   * Failed logins on an account from every unknown client (the account-wide limit counts
   * failures only): the normalised email, hashed so no address is stored in Redis.
   */
  loginAccount: (normalisedEmail: string): string => `login:acct:${emailHash(normalisedEmail)}`,
  /** Past the account-wide limit: the one attempt unknown clients of the account share per slow window. */
  loginAccountSlow: (normalisedEmail: string): string => `login:acct-slow:${emailHash(normalisedEmail)}`,
  /** Second-factor codes tried for a user (login's second step, approvals, password change, removal). */
  mfaUser: (userId: string): string => `mfa:user:${userId}`,
  /** Login attempts on its account from one known device (the device token's nonce). */
  loginDevice: (nonce: string): string => `login:device:${nonce}`,
  /**
   * Login attempts on an account from one client IP (`UNKNOWN_CLIENT_IP` when none is known: the
   * attempts without one share a count).
   */
  loginAccountIp: (normalisedEmail: string, clientIp: string): string =>
    `login:acct-ip:${emailHash(normalisedEmail)}:${clientIp === '' ? UNKNOWN_CLIENT_IP : clientIp}`,
  /** Login attempts from a client IP, on any account. */
  loginIp: (clientIp: string): string => `login:ip:${clientIp}`,
  /** Sign-ups from a client IP. */
  signupIp: (clientIp: string): string => `signup:ip:${clientIp}`,
  /**
   * Throttled login refusals of a throttle key (`loginAccount`/`loginAccountIp`/`loginIp`) not yet recorded, and
   * the marker of the window whose refusal was recorded (stores/throttled-refusals.ts). The
   * braces keep both in one Redis Cluster slot (one script uses them).
   */
  refusalsUnrecorded: (throttleKey: string): string => `login:refused:{${throttleKey}}:unrecorded`,
  refusalRecorded: (throttleKey: string): string => `login:refused:{${throttleKey}}:recorded`,
  /** Device codes issued to a client IP. */
  deviceIssueIp: (clientIp: string): string => `device:issue:ip:${clientIp}`,
  /** User codes entered (looked up or decided) by a user. */
  deviceEntryUser: (userId: string): string => `device:entry:user:${userId}`,
  /** User codes entered from a client IP. */
  deviceEntryIp: (clientIp: string): string => `device:entry:ip:${clientIp}`,
};
