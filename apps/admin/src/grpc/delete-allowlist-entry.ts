import type { AdminService } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { canManageApiKeys } from '../domain/roles.ts';
import type { AdminDeps } from './deps.ts';
import { requireUserSession } from './principal.ts';
import {
  ALLOWLIST_ENTRY_NOT_FOUND_MESSAGE,
  ALLOWLIST_ROLE_MESSAGE,
  requireProject,
} from './project-access.ts';

/**
 * DeleteAllowlistEntry: removes one entry; an unknown (or already deleted) entry is not_found.
 * Gateways see the change when their cached key verification expires (within a second).
 */
export function deleteAllowlistEntry(
  deps: AdminDeps,
): ServiceImpl<typeof AdminService>['deleteAllowlistEntry'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    if (!canManageApiKeys(session.role)) throw new AppError('forbidden', ALLOWLIST_ROLE_MESSAGE);
    const project = await requireProject(deps, session, req.projectId);
    const deleted = isId('allowlistEntry', req.entryId)
      ? await deps.allowlist.delete(project.tenantId, project.id, req.entryId)
      : undefined;
    if (!deleted) throw new AppError('not_found', ALLOWLIST_ENTRY_NOT_FOUND_MESSAGE);
    deps.logger.info(
      {
        allowlistEntryId: deleted.id,
        projectId: project.id,
        tenantId: project.tenantId,
        userId: session.user.id,
        cidr: deleted.cidr,
      },
      'allowlist entry deleted',
    );
    return {};
  };
}
