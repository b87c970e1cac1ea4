import { ROLE_NAMES, type RoleName } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { TenantRole } from '@relayplane/proto/admin';
import { roleName } from '@relayplane/shared/iam';
import { sessionActor } from '../audit/actor.ts';
import { decideMemberChange, type MemberChange, type MemberDecision } from '../domain/memberships.ts';
import type { MemberRecord, SessionRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';

export const CANNOT_MANAGE_MEMBERS_MESSAGE = 'the role does not allow managing members';
export const OWNER_ONLY_MESSAGE = 'only an owner can grant the owner role or change an owner';
export const LAST_OWNER_MESSAGE = 'a tenant needs at least one owner';
export const MEMBER_NOT_FOUND_MESSAGE = 'member not found';

/** The role a request names, or invalid_request. */
export function requestedRole(role: TenantRole): RoleName {
  const named = roleName(role);
  if (!named) throw new AppError('invalid_request', `role must be one of ${ROLE_NAMES.join(', ')}`);
  return named;
}

/** The error a refused membership decision answers. */
export function refuse(decision: Exclude<MemberDecision, 'ok'>): AppError {
  switch (decision) {
    case 'not_allowed':
      return new AppError('forbidden', CANNOT_MANAGE_MEMBERS_MESSAGE);
    case 'owner_only':
      return new AppError('forbidden', OWNER_ONLY_MESSAGE);
    case 'last_owner':
      return new AppError('conflict', LAST_OWNER_MESSAGE);
  }
}

/**
 * Applies `change` to the member `userId` of the actor's tenant, as `decideMemberChange` allows
 * it (decided in the store's transaction, with the tenant locked): the changed member,
 * or the error the outcome answers.
 */
export async function changeMember(
  deps: AdminDeps,
  session: SessionRecord,
  userId: string,
  change: MemberChange,
): Promise<MemberRecord> {
  if (!isId('user', userId)) throw new AppError('not_found', MEMBER_NOT_FOUND_MESSAGE);
  const result = await deps.accounts.changeMember(
    session.tenant.id,
    session.user.id,
    userId,
    change,
    (a, target, owners) => decideMemberChange(a, target, change, owners),
    (trx, { before, after }) =>
      deps.audit.record(trx, {
        action: change.kind === 'remove' ? 'member.remove' : 'member.role_change',
        tenantId: session.tenant.id,
        actor: sessionActor(session),
        target: { type: 'user', id: before.user.id },
        details: change.kind === 'remove' ? { role: before.role } : { from: before.role, to: after.role },
      }),
  );
  if (result.outcome === 'ok') return result.member;
  if (result.outcome === 'not_found') throw new AppError('not_found', MEMBER_NOT_FOUND_MESSAGE);
  throw refuse(result.outcome);
}
