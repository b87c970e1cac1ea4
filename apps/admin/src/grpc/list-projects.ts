import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { projectMessage } from './messages.ts';
import { requireActor } from './principal.ts';

/** ListProjects: a page of the principal's active tenant's projects (a machine's: its own), oldest first. */
export function listProjects(deps: AdminDeps): ServiceImpl<typeof AdminService>['listProjects'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'projects:read');
    // Bots and identity tokens see their own project only.
    const page = await deps.projects.list(actor.tenantId, pageRequest(req), actor.projectId);
    return { projects: page.items.map(projectMessage), nextCursor: nextCursor(page) };
  };
}
