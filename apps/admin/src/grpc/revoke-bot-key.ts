import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import type { AdminDeps } from './deps.ts';
import { botKeyMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { BOT_KEY_NOT_FOUND_MESSAGE, requireBot, requireProject } from './project-access.ts';

/**
 * RevokeBotKey: idempotent — revoking a revoked key answers its original revoked_at. The token
 * stops authenticating at once: Authenticate reads the key on every call (no cache).
 */
export function revokeBotKey(deps: AdminDeps): ServiceImpl<typeof AdminService>['revokeBotKey'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'bots:write');
    const project = await requireProject(deps, actor, req.projectId);
    const bot = await requireBot(deps, project, req.botId);
    const revoked = isId('apiKey', req.keyId)
      ? await deps.bots.revokeKey(
          bot.tenantId,
          bot.projectId,
          bot.id,
          req.keyId,
          deps.clock.now(),
          (trx, done) =>
            deps.audit.record(trx, {
              action: 'bot_key.revoke',
              tenantId: bot.tenantId,
              actor: auditActor(actor),
              target: { type: 'bot_key', id: done.key.id },
              details: { project_id: bot.projectId, bot_id: bot.id, already_revoked: done.alreadyRevoked },
            }),
        )
      : undefined;
    if (!revoked) throw new AppError('not_found', BOT_KEY_NOT_FOUND_MESSAGE);
    deps.logger.info(
      {
        botKeyId: revoked.id,
        botId: bot.id,
        projectId: project.id,
        tenantId: project.tenantId,
        ...actor.log,
      },
      'bot key revoked',
    );
    return { botKey: botKeyMessage(revoked) };
  };
}
