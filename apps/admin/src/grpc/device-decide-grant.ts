import { AppError } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import { hashCode } from '../domain/device-codes.ts';
import { DeviceGrantStore } from '../stores/device-grants.ts';
import type { AdminDeps } from './deps.ts';
import { enterUserCode, USER_CODE_NOT_FOUND_MESSAGE } from './device-flow.ts';

export const APPROVAL_NEEDS_MFA_MESSAGE =
  'this account has a second factor: send a current code from the authenticator app (or a recovery code) as mfa_code to approve';

/**
 * DecideDeviceGrant: approves or denies a pending user code as the caller. Approval ties the
 * CLI token the device then receives to the caller's user and the session's active tenant.
 * Of two concurrent decisions on one code only the first applies; the second answers not_found.
 */
export function decideDeviceGrant(deps: AdminDeps): ServiceImpl<typeof AdminService>['decideDeviceGrant'] {
  return async (req) => {
    const { session, userCode } = await enterUserCode(deps, req.principal, req.userCode, req.clientIp);
    // Approving hands a device a 30-day token: an enrolled user proves a fresh second factor.
    if (req.approve && (await deps.secondFactor.isEnrolled(session.user.id))) {
      if (req.mfaCode.trim() === '') throw new AppError('forbidden', APPROVAL_NEEDS_MFA_MESSAGE);
      await deps.secondFactor.verify(session.user, req.mfaCode, {
        tenantId: session.tenant.id,
        clientIp: req.clientIp,
      });
    }
    // The decision and its event commit together (the store, bound to the transaction, decides in one statement).
    const decided = await deps.audit.change(async (trx) => {
      const done = await new DeviceGrantStore(trx).decide(hashCode(userCode), deps.clock.now(), {
        approve: req.approve,
        userId: session.user.id,
        tenantId: session.tenant.id,
        sessionId: session.id,
      });
      if (done) {
        await deps.audit.record(trx, {
          action: req.approve ? 'device.approve' : 'device.deny',
          tenantId: session.tenant.id,
          actor: sessionActor(session),
          target: { type: 'device_client', id: done.clientId },
          details: { client_id: done.clientId },
        });
      }
      return done;
    });
    if (!decided) throw new AppError('not_found', USER_CODE_NOT_FOUND_MESSAGE);
    const status = req.approve ? 'approved' : 'denied';
    deps.logger.info(
      { clientId: decided.clientId, userId: session.user.id, tenantId: session.tenant.id, status },
      `device authorization ${status}`,
    );
    return { status, clientId: decided.clientId };
  };
}
