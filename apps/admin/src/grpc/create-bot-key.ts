import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { hashToken, newToken } from '@relayplane/contract/tokens';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import { BOT_KEY_DISPLAY_PREFIX_LENGTH } from '../domain/bots.ts';
import type { AdminDeps } from './deps.ts';
import { botKeyMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { BOT_NOT_FOUND_MESSAGE, requireBot, requireProject } from './project-access.ts';

/** What creating a key over the per-bot limit answers (unprocessable, 422). */
export function botKeyLimitMessage(max: number): string {
  return (
    `the bot already has ${max} active keys, the most a bot may have (ADMIN_MAX_ACTIVE_KEYS_PER_BOT): ` +
    'revoke one to create another'
  );
}

/**
 * CreateBotKey: a bot token (`rpb_`), answered here once; only its SHA-256 is stored. A bot has
 * at most `ADMIN_MAX_ACTIVE_KEYS_PER_BOT` unrevoked keys (counted with the bot locked, so
 * concurrent calls cannot pass it); one more is unprocessable.
 */
export function createBotKey(deps: AdminDeps): ServiceImpl<typeof AdminService>['createBotKey'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'bots:write');
    const project = await requireProject(deps, actor, req.projectId);
    const bot = await requireBot(deps, project, req.botId);
    const token = newToken('bot');
    const key = {
      id: newId('apiKey'),
      tenantId: bot.tenantId,
      projectId: bot.projectId,
      botId: bot.id,
      displayPrefix: token.slice(0, BOT_KEY_DISPLAY_PREFIX_LENGTH),
      lastFour: token.slice(-4),
      createdAt: deps.clock.now(),
      lastUsedAt: null,
      revokedAt: null,
    };
    const outcome = await deps.bots.createKey({ ...key, tokenHash: hashToken(token) }, (trx) =>
      deps.audit.record(trx, {
        action: 'bot_key.create',
        tenantId: bot.tenantId,
        actor: auditActor(actor),
        target: { type: 'bot_key', id: key.id },
        details: {
          project_id: bot.projectId,
          bot_id: bot.id,
          display_prefix: key.displayPrefix,
          last_four: key.lastFour,
        },
      }),
    );
    if (outcome === 'bot_not_found') throw new AppError('not_found', BOT_NOT_FOUND_MESSAGE);
    if (outcome === 'limit_reached') {
      throw new AppError('unprocessable', botKeyLimitMessage(deps.bots.maxActiveKeysPerBot));
    }
    deps.logger.info(
      {
        botKeyId: key.id,
        botId: bot.id,
        projectId: project.id,
        tenantId: project.tenantId,
        ...actor.log,
      },
      'bot key created',
    );
    return { botKey: botKeyMessage(key), token };
  };
}
