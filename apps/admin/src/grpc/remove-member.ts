import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { changeMember } from './members.ts';
import { memberMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';

/**
 * RemoveMember: owners and admins; only an owner removes an owner; never the last owner.
 * The removed user's sessions in this tenant stop authenticating (sessions join memberships).
 */
export function removeMember(deps: AdminDeps): ServiceImpl<typeof AdminService>['removeMember'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'members:write');
    const member = await changeMember(deps, session, req.userId, { kind: 'remove' });
    deps.logger.info(
      { tenantId: session.tenant.id, userId: member.user.id, by: session.user.id },
      'member removed',
    );
    return { member: memberMessage(member) };
  };
}
