import { AppError } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import { decideAddMember } from '../domain/memberships.ts';
import { normaliseEmail } from '../domain/validation.ts';
import type { AdminDeps } from './deps.ts';
import { refuse, requestedRole } from './members.ts';
import { memberMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';

export const NO_SUCH_USER_MESSAGE = 'no user with that email';
export const ALREADY_MEMBER_MESSAGE = 'the user is already a member of this tenant';

/**
 * AddMember: an existing user, by email, joins the active tenant with a role. There are no
 * invitations: an unknown email answers not_found. The permission check comes before the
 * lookup, so only owners and admins can learn whether an email is registered.
 */
export function addMember(deps: AdminDeps): ServiceImpl<typeof AdminService>['addMember'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'members:write');
    const role = requestedRole(req.role);
    const decision = decideAddMember(session.role, role);
    if (decision !== 'ok') throw refuse(decision);
    if (req.email.trim() === '') throw new AppError('invalid_request', 'email is required');
    const user = await deps.accounts.findUserByEmail(normaliseEmail(req.email));
    if (!user) throw new AppError('not_found', NO_SUCH_USER_MESSAGE);
    const { passwordHash: _, ...record } = user;
    const added = await deps.accounts.addMember(session.tenant.id, record, role, deps.clock.now(), (trx) =>
      deps.audit.record(trx, {
        action: 'member.add',
        tenantId: session.tenant.id,
        actor: sessionActor(session),
        target: { type: 'user', id: user.id },
        details: { role },
      }),
    );
    if (added === 'exists') throw new AppError('conflict', ALREADY_MEMBER_MESSAGE);
    deps.logger.info(
      { tenantId: session.tenant.id, userId: user.id, role, by: session.user.id },
      'member added',
    );
    return { member: memberMessage(added) };
  };
}
