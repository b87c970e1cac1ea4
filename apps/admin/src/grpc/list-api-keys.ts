import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { apiKeyMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { requireProject } from './project-access.ts';

/**
 * ListApiKeys: a page of a project's keys (revoked ones too), newest first; with `key_id`, that
 * key only (how the gateway checks a key is the project's). Every role may list; no key is ever
 * answered.
 */
export function listApiKeys(deps: AdminDeps): ServiceImpl<typeof AdminService>['listApiKeys'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'api_keys:read');
    const paging = pageRequest(req);
    const project = await requireProject(deps, actor, req.projectId);
    const page = await deps.apiKeys.list(
      project.tenantId,
      project.id,
      paging,
      req.keyId === '' ? undefined : req.keyId,
    );
    return { apiKeys: page.items.map(apiKeyMessage), nextCursor: nextCursor(page) };
  };
}
