import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import type { AdminDeps } from './deps.ts';
import { requireActor } from './principal.ts';
import { ALLOWLIST_ENTRY_NOT_FOUND_MESSAGE, requireProject } from './project-access.ts';

/**
 * DeleteAllowlistEntry: removes one entry; an unknown (or already deleted) entry is not_found.
 * Gateways see the change when their cached key verification expires (within a second).
 */
export function deleteAllowlistEntry(
  deps: AdminDeps,
): ServiceImpl<typeof AdminService>['deleteAllowlistEntry'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'allowlist:write');
    const project = await requireProject(deps, actor, req.projectId);
    const deleted = isId('allowlistEntry', req.entryId)
      ? await deps.allowlist.delete(project.tenantId, project.id, req.entryId, (trx, entry) =>
          deps.audit.record(trx, {
            action: 'allowlist.delete',
            tenantId: project.tenantId,
            actor: auditActor(actor),
            target: { type: 'allowlist_entry', id: entry.id },
            details: { project_id: project.id, cidr: entry.cidr },
          }),
        )
      : undefined;
    if (!deleted) throw new AppError('not_found', ALLOWLIST_ENTRY_NOT_FOUND_MESSAGE);
    deps.logger.info(
      {
        allowlistEntryId: deleted.id,
        projectId: project.id,
        tenantId: project.tenantId,
        ...actor.log,
        cidr: deleted.cidr,
      },
      'allowlist entry deleted',
    );
    return {};
  };
}
