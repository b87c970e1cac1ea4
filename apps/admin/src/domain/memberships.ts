/** Who may change which membership of a tenant. Pure. */

import { ROLES, type RoleName } from '@relayplane/contract/contract';
import { PrincipalKind } from '@relayplane/proto/admin';
import { can } from '@relayplane/shared/iam';

/** What a change of membership would do, or why it may not. */
export type MemberDecision = 'ok' | 'not_allowed' | 'owner_only' | 'last_owner';

export type MemberChange = { kind: 'remove' } | { kind: 'set_role'; role: RoleName };

/** Whether the role grants members:write (docs/iam.md: owners and admins). */
export function canManageMembers(role: RoleName): boolean {
  return can({ kind: PrincipalKind.USER_SESSION, role }, 'members:write');
}

/** Adding a member: only an owner may make someone an owner. */
export function decideAddMember(actor: RoleName, role: RoleName): MemberDecision {
  if (!canManageMembers(actor)) return 'not_allowed';
  if (role === ROLES.owner && actor !== ROLES.owner) return 'owner_only';
  return 'ok';
}

/**
 * Changing or removing a member whose role is `target`, when the tenant has `owners` owners.
 * Only an owner touches the owner role (granting it, or changing or removing an owner), so an
 * admin can never lock the owners out; and the last owner stays, so a tenant is never unowned.
 */
export function decideMemberChange(
  actor: RoleName,
  target: RoleName,
  change: MemberChange,
  owners: number,
): MemberDecision {
  if (!canManageMembers(actor)) return 'not_allowed';
  const grantsOwner = change.kind === 'set_role' && change.role === ROLES.owner;
  if ((target === ROLES.owner || grantsOwner) && actor !== ROLES.owner) return 'owner_only';
  const losesOwner = target === ROLES.owner && (change.kind === 'remove' || change.role !== ROLES.owner);
  if (losesOwner && owners <= 1) return 'last_owner';
  return 'ok';
}
