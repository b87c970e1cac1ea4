import { BOT_ROLE_NAMES, DEFAULT_BOT_ROLE } from '@relayplane/contract/contract';
import { tenantRole } from '@relayplane/shared/iam';
import { Bot, BotKey } from '../components.ts';
import { inProject } from '../plugins/auth.ts';
import { presentBot, presentBotKey, required } from '../present.ts';
import {
  errorResponse,
  object,
  oneOf,
  PAGE_BAD_REQUEST,
  PAGING,
  pageOf,
  pageParams,
  pageQuery,
  pathParams,
  ref,
  Type,
} from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const NOT_FOUND = errorResponse('The project, bot or key does not exist in the active tenant.');

export function registerBots(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/projects/:project_id/bots',
    {
      onRequest: guards.allow('bots:read'),
      schema: {
        operationId: 'listBots',
        summary: "List a project's bots (machine identities)",
        description: `The bots of the project, oldest first. ${PAGING}`,
        tags: ['bots'],
        params: pathParams('project_id'),
        querystring: pageQuery(),
        response: { 200: pageOf('bots', ref(Bot)), 400: PAGE_BAD_REQUEST, 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.admin.listBots({ ...inProject(request), ...pageParams(request.query) });
      return { bots: res.bots.map(presentBot), next_cursor: res.nextCursor || null };
    },
  );

  app.post(
    '/admin/v1/projects/:project_id/bots',
    {
      onRequest: guards.allow('bots:write'),
      schema: {
        operationId: 'createBot',
        summary: 'Create a bot in a project',
        description:
          '`role` is project-scoped: `developer` (default) or `viewer`. ' +
          "The plan's bot limit (tenant-wide): 422.",
        tags: ['bots'],
        params: pathParams('project_id'),
        body: object({
          name: Type.String({ minLength: 1, maxLength: 64 }),
          role: Type.Optional(oneOf(BOT_ROLE_NAMES, { default: DEFAULT_BOT_ROLE })),
        }),
        response: {
          201: ref(Bot),
          404: NOT_FOUND,
          422: errorResponse("The plan's bot limit is reached: upgrade the plan."),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createBot({
        ...inProject(request),
        name: request.body.name,
        role: tenantRole(request.body.role ?? DEFAULT_BOT_ROLE),
      });
      return reply.code(201).send(presentBot(required(res.bot, 'createBot.bot')));
    },
  );

  app.post(
    '/admin/v1/projects/:project_id/bots/:bot_id/keys',
    {
      onRequest: guards.allow('bots:write'),
      schema: {
        operationId: 'createBotKey',
        summary: 'Create a key for a bot (its bot token, shown once)',
        description:
          'Answers the bot token once, in field `token` (`rpb_…`); only its hash is stored. Send it as ' +
          '`Authorization: Bearer <token>`: it authenticates as the bot, within its project, with its role. ' +
          'A bot has at most `ADMIN_MAX_ACTIVE_KEYS_PER_BOT` (default 10) unrevoked keys: one more is 422 ' +
          '(revoke one first).',
        tags: ['bots'],
        params: pathParams('project_id', 'bot_id'),
        response: {
          201: object({
            bot_key: ref(BotKey),
            token: Type.String({ description: 'The bot token. Shown only here.' }),
          }),
          404: NOT_FOUND,
          422: errorResponse(
            'The bot already has the most active keys a bot may have; the message names the limit.',
          ),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createBotKey({ ...inProject(request), botId: request.params.bot_id });
      const botKey = required(res.botKey, 'createBotKey.bot_key');
      return reply.code(201).send({ bot_key: presentBotKey(botKey), token: res.token });
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/bots/:bot_id/keys',
    {
      onRequest: guards.allow('bots:read'),
      schema: {
        operationId: 'listBotKeys',
        summary: "List a bot's keys",
        description:
          'Revoked keys too, newest first. Never shows a token: only its display prefix and last four. ' +
          PAGING,
        tags: ['bots'],
        params: pathParams('project_id', 'bot_id'),
        querystring: pageQuery(),
        response: { 200: pageOf('bot_keys', ref(BotKey)), 400: PAGE_BAD_REQUEST, 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.admin.listBotKeys({
        ...inProject(request),
        botId: request.params.bot_id,
        ...pageParams(request.query),
      });
      return { bot_keys: res.botKeys.map(presentBotKey), next_cursor: res.nextCursor || null };
    },
  );

  app.delete(
    '/admin/v1/projects/:project_id/bots/:bot_id/keys/:key_id',
    {
      onRequest: guards.allow('bots:write'),
      schema: {
        operationId: 'revokeBotKey',
        summary: 'Revoke a bot key',
        description: 'Idempotent. The token stops authenticating at once.',
        tags: ['bots'],
        params: pathParams('project_id', 'bot_id', 'key_id'),
        response: { 200: ref(BotKey), 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.admin.revokeBotKey({
        ...inProject(request),
        botId: request.params.bot_id,
        keyId: request.params.key_id,
      });
      return presentBotKey(required(res.botKey, 'revokeBotKey.bot_key'));
    },
  );
}
