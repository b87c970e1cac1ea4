import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { changeMember, requestedRole } from './members.ts';
import { memberMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';

/** ChangeMemberRole: owners and admins; the owner role stays with owners; never the last owner. */
export function changeMemberRole(deps: AdminDeps): ServiceImpl<typeof AdminService>['changeMemberRole'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'members:write');
    const role = requestedRole(req.role);
    const member = await changeMember(deps, session, req.userId, { kind: 'set_role', role });
    deps.logger.info(
      { tenantId: session.tenant.id, userId: member.user.id, role, by: session.user.id },
      'member role changed',
    );
    return { member: memberMessage(member) };
  };
}
