import type { AdminService } from '@relayplane/proto/admin';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { sessionMessage } from './messages.ts';
import { requireUserSession } from './principal.ts';

export const NOT_A_MEMBER_MESSAGE = 'you are not a member of that tenant';

/**
 * SwitchTenant: the session (same token) now acts in another tenant of its user, with that
 * membership's role. A tenant the user is not a member of, existing or not, answers the same
 * forbidden, so the answer does not reveal which tenant ids exist.
 */
export function switchTenant(deps: AdminDeps): ServiceImpl<typeof AdminService>['switchTenant'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    if (!isId('tenant', req.tenantId)) throw new AppError('forbidden', NOT_A_MEMBER_MESSAGE);
    const switched = await deps.sessions.switchTenant(session.id, session.user.id, req.tenantId);
    if (!switched) throw new AppError('forbidden', NOT_A_MEMBER_MESSAGE);
    const updated = await deps.sessions.findLiveById(session.id, deps.clock.now());
    // Removed from that tenant (or logged out) in between: the session no longer authenticates.
    if (!updated) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    deps.logger.info(
      { userId: session.user.id, sessionId: session.id, from: session.tenant.id, to: updated.tenant.id },
      'session switched tenant',
    );
    return { session: sessionMessage(updated) };
  };
}
