import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { memberMessage } from './messages.ts';
import { requireUserSession } from './principal.ts';

/** ListMembers: the active tenant's members; any member may list them. */
export function listMembers(deps: AdminDeps): ServiceImpl<typeof AdminService>['listMembers'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    const members = await deps.accounts.listMembers(session.tenant.id);
    return { members: members.map(memberMessage) };
  };
}
