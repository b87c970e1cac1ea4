import type { AdminService } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { newId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { canCreateProject } from '../domain/roles.ts';
import { checkEnvironment, checkProjectName } from '../domain/validation.ts';
import type { AdminDeps } from './deps.ts';
import { projectMessage } from './messages.ts';
import { requireUserSession } from './principal.ts';
import { valid } from './valid.ts';

/** CreateProject: a project in the principal's active tenant, within the tenant plan's project limit. */
export function createProject(deps: AdminDeps): ServiceImpl<typeof AdminService>['createProject'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    if (!canCreateProject(session.role)) {
      throw new AppError('forbidden', 'your role does not allow creating projects');
    }
    const name = valid(checkProjectName(req.name));
    const environment = valid(checkEnvironment(req.environment));
    const project = {
      id: newId('project'),
      tenantId: session.tenant.id,
      name,
      environment,
      createdAt: deps.clock.now(),
    };
    // Billing owns the plan; without a reachable billing the limit is unknown, so the call fails (503).
    const { plan } = await deps.billing.getSubscription({ tenantId: project.tenantId });
    const maxProjects = plan?.limits?.maxProjects ?? 0;
    const outcome = await deps.projects.create(project, maxProjects);
    if (outcome === 'name_taken') throw new AppError('conflict', `a project named "${name}" already exists`);
    if (outcome === 'limit_reached') {
      throw new AppError(
        'unprocessable',
        `your plan allows at most ${maxProjects} project${maxProjects === 1 ? '' : 's'}; upgrade to create more`,
      );
    }
    return { project: projectMessage(project) };
  };
}
