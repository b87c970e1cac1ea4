import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import { SessionStore } from '../stores/sessions.ts';
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
    // The switch and its event (in the chain of the tenant switched to) commit together.
    const switched = await deps.audit.change(async (trx) => {
      const moved = await new SessionStore(trx).switchTenant(session.id, session.user.id, req.tenantId);
      if (moved) {
        await deps.audit.record(trx, {
          action: 'session.switch_tenant',
          tenantId: req.tenantId,
          actor: sessionActor(session),
          target: { type: 'session', id: session.id },
          details: { from_tenant_id: session.tenant.id },
        });
      }
      return moved;
    });
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
