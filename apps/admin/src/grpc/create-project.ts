import { entitlementOf } from '@relayplane/contract/entitlements';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import { checkEnvironment, checkProjectName } from '../domain/validation.ts';
import type { AdminDeps } from './deps.ts';
import { projectMessage } from './messages.ts';
import { requireUserActor } from './principal.ts';
import { valid } from './valid.ts';

/** CreateProject: a project in the principal's active tenant, within the tenant plan's project limit. */
export function createProject(deps: AdminDeps): ServiceImpl<typeof AdminService>['createProject'] {
  return async (req) => {
    const session = await requireUserActor(deps, req.principal, 'projects:write');
    const name = valid(checkProjectName(req.name));
    const environment = valid(checkEnvironment(req.environment));
    const project = {
      id: newId('project'),
      tenantId: session.tenant.id,
      name,
      environment,
      createdAt: deps.clock.now(),
    };
    // Billing decides the limit and what exceeding it answers; without a reachable billing the call fails (503).
    const limit = entitlementOf(
      await deps.billing.getEntitlements({ tenantId: project.tenantId }),
      'max_projects',
    );
    const outcome = await deps.projects.create(project, limit.value, (trx) =>
      deps.audit.record(trx, {
        action: 'project.create',
        tenantId: project.tenantId,
        actor: sessionActor(session),
        target: { type: 'project', id: project.id },
        details: { name, environment },
      }),
    );
    if (outcome === 'name_taken') throw new AppError('conflict', `a project named "${name}" already exists`);
    if (outcome === 'limit_reached') throw limit.exceeded();
    return { project: projectMessage(project) };
  };
}
