import type { AdminService } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { decideMemberChange } from '../domain/memberships.ts';
import type { AdminDeps } from './deps.ts';
import { changedMember, MEMBER_NOT_FOUND_MESSAGE, requestedRole } from './members.ts';
import { memberMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';

/** ChangeMemberRole: owners and admins; the owner role stays with owners; never the last owner. */
export function changeMemberRole(deps: AdminDeps): ServiceImpl<typeof AdminService>['changeMemberRole'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'members:write');
    const role = requestedRole(req.role);
    if (!isId('user', req.userId)) throw new AppError('not_found', MEMBER_NOT_FOUND_MESSAGE);
    const change = { kind: 'set_role', role } as const;
    const member = changedMember(
      await deps.accounts.changeMember(
        session.tenant.id,
        session.user.id,
        req.userId,
        change,
        (actor, target, owners) => decideMemberChange(actor, target, change, owners),
      ),
    );
    deps.logger.info(
      { tenantId: session.tenant.id, userId: member.user.id, role, by: session.user.id },
      'member role changed',
    );
    return { member: memberMessage(member) };
  };
}
