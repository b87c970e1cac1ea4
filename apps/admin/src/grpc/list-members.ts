import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { memberMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';

/** ListMembers: the active tenant's members; any member may list them. */
export function listMembers(deps: AdminDeps): ServiceImpl<typeof AdminService>['listMembers'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'members:read');
    const members = await deps.accounts.listMembers(session.tenant.id);
    return { members: members.map(memberMessage) };
  };
}
