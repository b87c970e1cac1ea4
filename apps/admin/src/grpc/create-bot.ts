import { entitlementOf } from '@relayplane/contract/entitlements';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import { roleName } from '@relayplane/shared/iam';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import { checkBotName, checkBotRole } from '../domain/bots.ts';
import type { AdminDeps } from './deps.ts';
import { botMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { PROJECT_NOT_FOUND_MESSAGE, requireProject } from './project-access.ts';
import { valid } from './valid.ts';

/** CreateBot: a bot in a project of the principal's tenant, within the plan's (tenant-wide) bot limit. */
export function createBot(deps: AdminDeps): ServiceImpl<typeof AdminService>['createBot'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'bots:write');
    const name = valid(checkBotName(req.name));
    const role = valid(checkBotRole(roleName(req.role)));
    const project = await requireProject(deps, actor, req.projectId);

    // Billing decides the limit and what exceeding it answers; without a reachable billing the call fails (503).
    const limit = entitlementOf(
      await deps.billing.getEntitlements({ tenantId: project.tenantId }),
      'max_bots',
    );
    const bot = {
      id: newId('bot'),
      tenantId: project.tenantId,
      projectId: project.id,
      name,
      role,
      createdAt: deps.clock.now(),
    };
    const outcome = await deps.bots.create(bot, limit.value, (trx) =>
      deps.audit.record(trx, {
        action: 'bot.create',
        tenantId: project.tenantId,
        actor: auditActor(actor),
        target: { type: 'bot', id: bot.id },
        details: { project_id: project.id, name, role },
      }),
    );
    if (outcome === 'project_not_found') throw new AppError('not_found', PROJECT_NOT_FOUND_MESSAGE);
    if (outcome === 'limit_reached') throw limit.exceeded();
    deps.logger.info(
      { botId: bot.id, projectId: project.id, tenantId: project.tenantId, ...actor.log, role },
      'bot created',
    );
    return { bot: botMessage(bot) };
  };
}
