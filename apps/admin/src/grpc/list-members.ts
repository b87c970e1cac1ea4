import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { memberMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';

/** ListMembers: a page of the active tenant's members, oldest membership first; any member may list them. */
export function listMembers(deps: AdminDeps): ServiceImpl<typeof AdminService>['listMembers'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'members:read');
    const page = await deps.accounts.listMembers(session.tenant.id, pageRequest(req));
    return { members: page.items.map(memberMessage), nextCursor: nextCursor(page) };
  };
}
