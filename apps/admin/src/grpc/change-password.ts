import { AppError } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import { checkPassword } from '../domain/validation.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';
import { admitGuess, attemptIp, clientLimit, countFailure, guessClient } from './login.ts';
import { requireOwnSession } from './sessions.ts';
import { valid } from './valid.ts';

export const WRONG_CURRENT_PASSWORD_MESSAGE = 'the current password is wrong';
export const SAME_PASSWORD_MESSAGE = 'the new password must differ from the current one';
export const PASSWORD_CHANGED_MEANWHILE_MESSAGE = 'the password was changed meanwhile; retry';
export const MFA_CODE_REQUIRED_MESSAGE =
  'this account has a second factor: send a current code from the authenticator app (or a recovery code) as mfa_code';

/** A refused attempt (`user.password_change`, outcome failure, or denied when throttled), on its own. */
function recordRefusal(
  deps: AdminDeps,
  session: SessionRecord,
  reason: 'wrong_current_password' | 'throttled',
) {
  return deps.audit.recordAlone({
    action: 'user.password_change',
    tenantId: session.tenant.id,
    actor: sessionActor(session),
    target: { type: 'user', id: session.user.id },
    outcome: reason === 'throttled' ? 'denied' : 'failure',
    details: { reason },
  });
}

/**
 * ChangePassword: the caller proves the current password and sets a new one (checked like
 * signup's). Every other access of the user is ended in the same transaction (the credentials
 * epoch moves on; other sessions and CLI tokens, approved unredeemed device grants and, unless
 * `keep_identity_tokens`, the identity tokens rooted at the user but those created under this
 * session: stores/sessions.ts endOthersIn); the session the request came with stays. Attempts
 * count against the account's login limits (login.ts admitGuess: from the client, and wrong
 * passwords against the account-wide failures), so a stolen session cannot guess the password
 * here instead; a success clears the account's count from that client. An enrolled user also
 * sends a fresh second-factor code (`mfa_code`).
 */
export function changePassword(deps: AdminDeps): ServiceImpl<typeof AdminService>['changePassword'] {
  return async (req) => {
    const session = await requireOwnSession(deps, req.principal);
    if (req.currentPassword === '') throw new AppError('invalid_request', 'current_password is required');
    const newPassword = valid(checkPassword(req.newPassword));
    if (newPassword === req.currentPassword) throw new AppError('invalid_request', SAME_PASSWORD_MESSAGE);
    const guess = guessClient(deps, '', undefined, '');
    try {
      await admitGuess(deps, session.user.email, guess, false);
    } catch (err) {
      if (err instanceof AppError && err.code === 'rate_limited')
        await recordRefusal(deps, session, 'throttled');
      throw err;
    }
    const user = await deps.accounts.findUserByEmail(session.user.email);
    if (
      !user ||
      user.id !== session.user.id ||
      !(await deps.passwords.verify(user.passwordHash, req.currentPassword))
    ) {
      await countFailure(deps, session.user.email);
      await recordRefusal(deps, session, 'wrong_current_password');
      throw new AppError('forbidden', WRONG_CURRENT_PASSWORD_MESSAGE);
    }
    // An enrolled user also proves the second factor, after the password (a wrong password burns no code).
    if (await deps.secondFactor.isEnrolled(user.id)) {
      if (req.mfaCode.trim() === '') throw new AppError('forbidden', MFA_CODE_REQUIRED_MESSAGE);
      await deps.secondFactor.verify(user, req.mfaCode, {
        tenantId: session.tenant.id,
        clientIp: attemptIp(''),
      });
    }
    const newHash = await deps.passwords.hash(newPassword);
    // The new hash, the revocations and the event commit together; never a password in it.
    const revoked = await deps.sessions.changePassword(
      {
        userId: user.id,
        currentHash: user.passwordHash,
        newHash,
        keepId: session.id,
        now: deps.clock.now(),
        revokeIdentityTokens: !req.keepIdentityTokens,
      },
      (trx, count) =>
        deps.audit.record(trx, {
          action: 'user.password_change',
          tenantId: session.tenant.id,
          actor: sessionActor(session),
          target: { type: 'user', id: user.id },
          details: {
            revoked_sessions: count.sessions,
            revoked_device_grants: count.deviceGrants,
            revoked_identity_tokens: count.identityTokens,
            kept_session_id: session.id,
          },
        }),
    );
    if (revoked === 'stale') throw new AppError('conflict', PASSWORD_CHANGED_MEANWHILE_MESSAGE);
    await deps.loginThrottle.clear(clientLimit(deps, session.user.email, guess).key);
    deps.logger.info({ userId: user.id, sessionId: session.id, revoked }, 'password changed');
    return {
      revokedSessions: revoked.sessions,
      revokedDeviceGrants: revoked.deviceGrants,
      revokedIdentityTokens: revoked.identityTokens,
    };
  };
}
