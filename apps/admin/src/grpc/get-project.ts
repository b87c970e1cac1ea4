import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { projectMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { requireProject } from './project-access.ts';

/**
 * GetProject: one project of the principal's active tenant (a machine's: its own only). Another
 * tenant's project, or a malformed id, answers not_found like a missing one.
 */
export function getProject(deps: AdminDeps): ServiceImpl<typeof AdminService>['getProject'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'projects:read');
    return { project: projectMessage(await requireProject(deps, actor, req.projectId)) };
  };
}
