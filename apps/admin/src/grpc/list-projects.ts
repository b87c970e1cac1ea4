import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { projectMessage } from './messages.ts';
import { requireUserSession } from './principal.ts';

/** ListProjects: the projects of the principal's active tenant, oldest first. */
export function listProjects(deps: AdminDeps): ServiceImpl<typeof AdminService>['listProjects'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    const projects = await deps.projects.list(session.tenant.id);
    return { projects: projects.map(projectMessage) };
  };
}
