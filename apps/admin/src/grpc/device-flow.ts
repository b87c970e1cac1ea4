/** What the four device-flow handlers share: who may approve, and the user-code entry throttle. */

import { AppError } from '@relayplane/contract/errors';
import type { Principal } from '@relayplane/proto/admin';
import { normaliseUserCode } from '../domain/device-codes.ts';
import { throttleKeys } from '../redis/keys.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';
import { enforceLimits, type Limit, throttleClientOf } from './limits.ts';
import { requireSecondFactorIfRequired, requireUserSession } from './principal.ts';

export const USER_CODE_NOT_FOUND_MESSAGE =
  'no pending device authorization for this code: it is unknown, expired, or already approved or denied';
const USER_CODE_INVALID_MESSAGE = 'user_code must be the 8-letter code the device shows (XXXX-XXXX)';
export const CLI_TOKEN_CANNOT_APPROVE_MESSAGE =
  'approving a device needs a login session; a CLI token cannot approve devices';
export const USER_CODE_RATE_LIMITED_MESSAGE = 'too many user codes entered; retry later';
export const DEVICE_CODES_RATE_LIMITED_MESSAGE = 'too many device authorization requests; retry later';

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
  requireSecondFactorIfRequired(session);
  if (session.kind === 'cli') throw new AppError('forbidden', CLI_TOKEN_CANNOT_APPROVE_MESSAGE);
  const limits = deps.deviceFlow.limits;
  const counted: Limit[] = [
    { key: throttleKeys.deviceEntryUser(session.user.id), max: limits.maxEntriesPerUser },
  ];
  const ip = clientIp.trim();
  if (ip !== '') {
    counted.push({
      key: throttleKeys.deviceEntryIp(throttleClientOf(deps, ip)),
      max: limits.maxEntriesPerIp,
    });
  }
  await enforceLimits(deps.deviceThrottle, counted, USER_CODE_RATE_LIMITED_MESSAGE);
  const userCode = normaliseUserCode(rawUserCode);
  if (!userCode) throw new AppError('invalid_request', USER_CODE_INVALID_MESSAGE);
  return { session, userCode };
}
