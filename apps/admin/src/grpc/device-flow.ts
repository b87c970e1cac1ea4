/** What the four device-flow handlers share: who may approve, and the user-code entry throttle. */
import type { Principal } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import type { RateLimiter } from '@relayplane/shared/rate-limit';
import { normaliseUserCode } from '../domain/device-codes.ts';
import { deviceThrottleKeys } from '../stores/device-grants.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';
import { requireUserSession } from './principal.ts';

export const USER_CODE_NOT_FOUND_MESSAGE =
  'no pending device authorization for this code: it is unknown, expired, or already approved or denied';
export const USER_CODE_INVALID_MESSAGE = 'user_code must be the 8-letter code the device shows (XXXX-XXXX)';
export const CLI_TOKEN_CANNOT_APPROVE_MESSAGE =
  'approving a device needs a login session; a CLI token cannot approve devices';
export const USER_CODE_RATE_LIMITED_MESSAGE = 'too many user codes entered; retry later';
export const DEVICE_CODES_RATE_LIMITED_MESSAGE = 'too many device authorization requests; retry later';

interface Limit {
  key: string;
  max: number;
}

/** Counts one hit on every limit; over any of them: rate_limited with the longest time left. */
export async function enforceLimits(throttle: RateLimiter, limits: Limit[], message: string): Promise<void> {
  const hits = await Promise.all(limits.map((l) => throttle.hit(l.key)));
  let retryAfterMs = 0;
  hits.forEach((hit, i) => {
    const limit = limits[i];
    if (limit && hit.count > limit.max) retryAfterMs = Math.max(retryAfterMs, hit.resetInMs);
  });
  if (retryAfterMs > 0) {
    throw new AppError('rate_limited', message, {
      retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
    });
  }
}

/**
 * The approver behind a principal and the user code they entered, counted against the user and
 * the client IP (every entry counts, found or not: that is what makes guessing impractical,
 * see domain/device-codes.ts). A CLI token may not approve: a device could otherwise renew its
 * own access forever.
 */
export async function enterUserCode(
  deps: AdminDeps,
  principal: Principal | undefined,
  rawUserCode: string,
  clientIp: string,
): Promise<{ session: SessionRecord; userCode: string }> {
  const session = await requireUserSession(deps, principal);
  if (session.kind === 'cli') throw new AppError('forbidden', CLI_TOKEN_CANNOT_APPROVE_MESSAGE);
  const limits = deps.deviceFlow.limits;
  const counted: Limit[] = [
    { key: deviceThrottleKeys.entryUser(session.user.id), max: limits.maxEntriesPerUser },
  ];
  const ip = clientIp.trim();
  if (ip !== '') counted.push({ key: deviceThrottleKeys.entryIp(ip), max: limits.maxEntriesPerIp });
  await enforceLimits(deps.deviceThrottle, counted, USER_CODE_RATE_LIMITED_MESSAGE);
  const userCode = normaliseUserCode(rawUserCode);
  if (!userCode) throw new AppError('invalid_request', USER_CODE_INVALID_MESSAGE);
  return { session, userCode };
}
