import { AppError } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { hashCode, isValidScope, newDeviceCode, newUserCode } from '../domain/device-codes.ts';
import { throttleKeys } from '../redis/keys.ts';
import type { AdminDeps } from './deps.ts';
import { DEVICE_CODES_RATE_LIMITED_MESSAGE } from './device-flow.ts';
import { enforceLimits, throttleClientOf } from './limits.ts';
import { clientOrigin } from './sessions.ts';

/** 20^8 user codes: a collision with a live one is rare; a few fresh draws always find a free one. */
const USER_CODE_ATTEMPTS = 5;

/**
 * StartDeviceAuthorization (RFC 8628 §3.1–3.2): a device code (256 bits) and a user code for
 * a known public client, counted per client IP. Both codes are answered here only; the
 * database holds their SHA-256.
 */
export function startDeviceAuthorization(
  deps: AdminDeps,
): ServiceImpl<typeof AdminService>['startDeviceAuthorization'] {
  return async (req) => {
    if (req.clientId === '') throw new AppError('invalid_request', 'invalid_request');
    if (!deps.deviceFlow.clientIds.includes(req.clientId))
      throw new AppError('invalid_request', 'invalid_client');
    if (!isValidScope(req.scope)) throw new AppError('invalid_request', 'invalid_scope');
    const clientIp = req.clientIp.trim();
    if (clientIp !== '') {
      await enforceLimits(
        deps.deviceThrottle,
        [
          {
            key: throttleKeys.deviceIssueIp(throttleClientOf(deps, clientIp)),
            max: deps.deviceFlow.limits.maxCodesPerIp,
          },
        ],
        DEVICE_CODES_RATE_LIMITED_MESSAGE,
      );
    }
    const { codeTtlSeconds, intervalSeconds } = deps.deviceFlow;
    // Shown on the approval page: where and with what the device asked.
    const origin = clientOrigin(clientIp);
    const now = deps.clock.now();
    for (let attempt = 0; attempt < USER_CODE_ATTEMPTS; attempt++) {
      const deviceCode = newDeviceCode();
      const userCode = newUserCode();
      const outcome = await deps.deviceGrants.create({
        deviceCodeHash: hashCode(deviceCode),
        userCodeHash: hashCode(userCode),
        clientId: req.clientId,
        scope: req.scope,
        intervalSeconds,
        createdAt: now,
        expiresAt: new Date(now.getTime() + codeTtlSeconds * 1000),
        requestedIp: origin.ip,
        requestedUserAgent: origin.userAgent,
      });
      if (outcome === 'created') {
        deps.logger.info({ clientId: req.clientId, clientIp }, 'device authorization started');
        return { deviceCode, userCode, expiresIn: codeTtlSeconds, interval: intervalSeconds };
      }
    }
    throw new AppError('unavailable', 'could not allocate a user code; retry', { retryAfterSeconds: 1 });
  };
}
