import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { botKeyMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { requireBot, requireProject } from './project-access.ts';

/** ListBotKeys: a page of a bot's keys (revoked ones too), newest first; never a token. Every role may list. */
export function listBotKeys(deps: AdminDeps): ServiceImpl<typeof AdminService>['listBotKeys'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'bots:read');
    const paging = pageRequest(req);
    const project = await requireProject(deps, actor, req.projectId);
    const bot = await requireBot(deps, project, req.botId);
    const page = await deps.bots.listKeys(bot.tenantId, bot.projectId, bot.id, paging);
    return { botKeys: page.items.map(botKeyMessage), nextCursor: nextCursor(page) };
  };
}
