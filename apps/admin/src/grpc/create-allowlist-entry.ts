import { entitlementOf } from '@relayplane/contract/entitlements';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import { parseCidr } from '../domain/cidr.ts';
import type { AdminDeps } from './deps.ts';
import { allowlistEntryMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { PROJECT_NOT_FOUND_MESSAGE, requireProject } from './project-access.ts';

/**
 * CreateAllowlistEntry: one CIDR block for a project of the principal's active tenant, stored
 * normalised (network address, canonical text), so one network written two ways is a duplicate
 * (conflict). Within the plan's limit on entries per project. Managing the allowlist takes the
 * same role as managing API keys: it guards the same requests.
 */
export function createAllowlistEntry(
  deps: AdminDeps,
): ServiceImpl<typeof AdminService>['createAllowlistEntry'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'allowlist:write');
    const project = await requireProject(deps, actor, req.projectId);
    const parsed = parseCidr(req.cidr);
    if (!parsed.ok) throw new AppError('unprocessable', parsed.message);
    const cidr = parsed.value.text;

    // Billing decides the limit and what exceeding it answers; without a reachable billing the call fails (503).
    const limit = entitlementOf(
      await deps.billing.getEntitlements({ tenantId: project.tenantId }),
      'max_allowlist_entries',
    );

    const entry = {
      id: newId('allowlistEntry'),
      tenantId: project.tenantId,
      projectId: project.id,
      cidr,
      createdAt: deps.clock.now(),
    };
    const outcome = await deps.allowlist.create(entry, limit.value, (trx) =>
      deps.audit.record(trx, {
        action: 'allowlist.create',
        tenantId: project.tenantId,
        actor: auditActor(actor),
        target: { type: 'allowlist_entry', id: entry.id },
        details: { project_id: project.id, cidr },
      }),
    );
    if (outcome === 'project_not_found') throw new AppError('not_found', PROJECT_NOT_FOUND_MESSAGE);
    if (outcome === 'duplicate') throw new AppError('conflict', `${cidr} is already in the allowlist`);
    if (outcome === 'limit_reached') throw limit.exceeded();
    deps.logger.info(
      {
        allowlistEntryId: entry.id,
        projectId: project.id,
        tenantId: project.tenantId,
        ...actor.log,
        cidr,
      },
      'allowlist entry created',
    );
    return { entry: allowlistEntryMessage(entry) };
  };
}
