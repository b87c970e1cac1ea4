import type { AdminService } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import { checkPassword } from '../domain/validation.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';
import { enforceLimits } from './limits.ts';
import { accountLimits, attemptIp, LOGIN_RATE_LIMITED_MESSAGE } from './login.ts';
import { requireOwnSession } from './sessions.ts';
import { valid } from './valid.ts';

export const WRONG_CURRENT_PASSWORD_MESSAGE = 'the current password is wrong';
export const SAME_PASSWORD_MESSAGE = 'the new password must differ from the current one';
export const PASSWORD_CHANGED_MEANWHILE_MESSAGE = 'the password was changed meanwhile; retry';

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
 * signup's). Every other session and CLI token of the user is revoked in the same transaction;
 * the one the request came with stays. Attempts count against the account's login limits (from
 * the client IP and from every IP, the same counts and message as logins), so a stolen session
 * cannot guess the password here instead; a success clears the account's count from that IP.
 */
export function changePassword(deps: AdminDeps): ServiceImpl<typeof AdminService>['changePassword'] {
  return async (req) => {
    const session = await requireOwnSession(deps, req.principal);
    if (req.currentPassword === '') throw new AppError('invalid_request', 'current_password is required');
    const newPassword = valid(checkPassword(req.newPassword));
    if (newPassword === req.currentPassword) throw new AppError('invalid_request', SAME_PASSWORD_MESSAGE);
    const { account, accountIp } = accountLimits(deps, session.user.email, attemptIp(''));
    try {
      await enforceLimits(deps.loginThrottle, [account, accountIp], LOGIN_RATE_LIMITED_MESSAGE);
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
      await recordRefusal(deps, session, 'wrong_current_password');
      throw new AppError('forbidden', WRONG_CURRENT_PASSWORD_MESSAGE);
    }
    const newHash = await deps.passwords.hash(newPassword);
    // The new hash, the revocations and the event commit together; never a password in it.
    const revoked = await deps.sessions.changePassword(
      { userId: user.id, currentHash: user.passwordHash, newHash, keepId: session.id, now: deps.clock.now() },
      (trx, count) =>
        deps.audit.record(trx, {
          action: 'user.password_change',
          tenantId: session.tenant.id,
          actor: sessionActor(session),
          target: { type: 'user', id: user.id },
          details: { revoked_sessions: count, kept_session_id: session.id },
        }),
    );
    if (revoked === 'stale') throw new AppError('conflict', PASSWORD_CHANGED_MEANWHILE_MESSAGE);
    await deps.loginThrottle.clear(accountIp.key);
    deps.logger.info({ userId: user.id, sessionId: session.id, revoked }, 'password changed');
    return { revokedSessions: revoked };
  };
}
