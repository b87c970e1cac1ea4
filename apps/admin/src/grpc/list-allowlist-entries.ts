import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { allowlistEntryMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { requireProject } from './project-access.ts';

/** ListAllowlistEntries: a page of a project's IP allowlist, oldest entry first. Every role may list. */
export function listAllowlistEntries(
  deps: AdminDeps,
): ServiceImpl<typeof AdminService>['listAllowlistEntries'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'allowlist:read');
    const paging = pageRequest(req);
    const project = await requireProject(deps, actor, req.projectId);
    const page = await deps.allowlist.list(project.tenantId, project.id, paging);
    return { entries: page.items.map(allowlistEntryMessage), nextCursor: nextCursor(page) };
  };
}
