import type { AdminService } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { decideMemberChange } from '../domain/memberships.ts';
import type { AdminDeps } from './deps.ts';
import { changedMember, MEMBER_NOT_FOUND_MESSAGE } from './members.ts';
import { memberMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';

/**
 * RemoveMember: owners and admins; only an owner removes an owner; never the last owner.
 * The removed user's sessions in this tenant stop authenticating (sessions join memberships).
 */
export function removeMember(deps: AdminDeps): ServiceImpl<typeof AdminService>['removeMember'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'members:write');
    if (!isId('user', req.userId)) throw new AppError('not_found', MEMBER_NOT_FOUND_MESSAGE);
    const change = { kind: 'remove' } as const;
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
      { tenantId: session.tenant.id, userId: member.user.id, by: session.user.id },
      'member removed',
    );
    return { member: memberMessage(member) };
  };
}
