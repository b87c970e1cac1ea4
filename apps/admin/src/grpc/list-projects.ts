import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { projectMessage } from './messages.ts';
import { requireActor } from './principal.ts';

/** ListProjects: the projects of the principal's active tenant (a machine's: its own), oldest first. */
export function listProjects(deps: AdminDeps): ServiceImpl<typeof AdminService>['listProjects'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'projects:read');
    const projects = await deps.projects.list(actor.tenantId);
    // Bots and identity tokens see their own project only.
    const visible =
      actor.projectId === undefined ? projects : projects.filter((p) => p.id === actor.projectId);
    return { projects: visible.map(projectMessage) };
  };
}
