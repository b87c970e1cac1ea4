import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { type AdminService, PrincipalKind } from '@relayplane/proto/admin';
import { currentRequestContext } from '@relayplane/shared/request-context';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';

/**
 * Logout: ends the principal's session, with its `session.logout` event in the same
 * transaction (the actor is the request's: `user`, or `cli` for a CLI token). Ending a session
 * that is already gone succeeds and records nothing.
 */
export function logout(deps: AdminDeps): ServiceImpl<typeof AdminService>['logout'] {
  return async (req) => {
    const principal = req.principal;
    if (!principal || principal.kind !== PrincipalKind.USER_SESSION || principal.sessionId === '') {
      throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    }
    // Scoped to the user, so a forged principal cannot end someone else's session.
    await deps.sessions.delete(principal.sessionId, principal.userId, (trx) =>
      deps.audit.record(trx, {
        action: 'session.logout',
        tenantId: principal.tenantId,
        actor: currentRequestContext()?.actor ?? { type: 'user', id: principal.userId },
        target: { type: 'session', id: principal.sessionId },
      }),
    );
    return {};
  };
}
