import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { hashCode } from '../domain/device-codes.ts';
import type { AdminDeps } from './deps.ts';
import { enterUserCode, USER_CODE_NOT_FOUND_MESSAGE } from './device-flow.ts';

/**
 * DescribeDeviceGrant: the pending grant behind a user code, for the verification page: the
 * client, and when, from where and with what user agent the device asked (empty when unknown).
 */
export function describeDeviceGrant(
  deps: AdminDeps,
): ServiceImpl<typeof AdminService>['describeDeviceGrant'] {
  return async (req) => {
    const { userCode } = await enterUserCode(deps, req.principal, req.userCode, req.clientIp);
    const grant = await deps.deviceGrants.findPending(hashCode(userCode), deps.clock.now());
    if (!grant) throw new AppError('not_found', USER_CODE_NOT_FOUND_MESSAGE);
    return {
      clientId: grant.clientId,
      expiresAt: timestampFromDate(grant.expiresAt),
      userCode,
      requestedAt: timestampFromDate(grant.requestedAt),
      requestedIp: grant.requestedIp ?? '',
      requestedUserAgent: grant.requestedUserAgent ?? '',
    };
  };
}
