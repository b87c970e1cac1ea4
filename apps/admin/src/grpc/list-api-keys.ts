import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { apiKeyMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { requireProject } from './project-access.ts';

/** ListApiKeys: a project's keys (revoked ones too), newest first. Every role may list; no key is ever answered. */
export function listApiKeys(deps: AdminDeps): ServiceImpl<typeof AdminService>['listApiKeys'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'api_keys:read');
    const project = await requireProject(deps, actor, req.projectId);
    const keys = await deps.apiKeys.list(project.tenantId, project.id);
    return { apiKeys: keys.map(apiKeyMessage) };
  };
}
