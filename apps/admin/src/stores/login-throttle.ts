/**
 * Login throttling: a fixed-window attempt counter per key (an account or a client IP), on
 * the shared rate limiter (`@relayplane/shared/rate-limit`: Redis shared by every replica,
 * per-process memory while Redis fails, never "no limit"). This module only names the keys.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '@relayplane/shared/logger';
import {
  FallbackRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  RedisRateLimiter,
  type WindowHit,
} from '@relayplane/shared/rate-limit';

export type ThrottleHit = WindowHit;
export type LoginThrottle = RateLimiter;
export { MemoryRateLimiter as MemoryLoginThrottle, RedisRateLimiter as RedisLoginThrottle };

/** The one place throttle keys are built (implementations only prepend their namespace). */
export const throttleKeys = {
  /** The account's key: the normalised email, hashed so no address is stored in Redis. */
  account: (normalisedEmail: string): string =>
    `login:acct:${createHash('sha256').update(normalisedEmail).digest('hex')}`,
  ip: (clientIp: string): string => `login:ip:${clientIp}`,
};

/** Redis first, per-process memory while Redis fails (logged as the "login throttle"). */
export class FallbackLoginThrottle extends FallbackRateLimiter {
  constructor(primary: LoginThrottle, fallback: LoginThrottle, logger: Logger) {
    super(primary, fallback, logger, 'login throttle');
  }
}
