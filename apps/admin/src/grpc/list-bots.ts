import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { botMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { requireProject } from './project-access.ts';

/** ListBots: a page of a project's bots, oldest first. Every role of the tenant may list. */
export function listBots(deps: AdminDeps): ServiceImpl<typeof AdminService>['listBots'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'bots:read');
    const paging = pageRequest(req);
    const project = await requireProject(deps, actor, req.projectId);
    const page = await deps.bots.list(project.tenantId, project.id, paging);
    return { bots: page.items.map(botMessage), nextCursor: nextCursor(page) };
  };
}
