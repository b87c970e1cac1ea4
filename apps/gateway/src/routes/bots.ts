import type { Bot, BotKey, IdentityToken, Principal } from '@relayplane/proto/admin';
import {
  BOT_ROLE_NAMES,
  type BotRoleName,
  DEFAULT_BOT_ROLE,
  isBotRoleName,
} from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import { permissionsOf, roleName, subjectOf, tenantRole } from '@relayplane/shared/iam';
import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { iso } from '../present.ts';
import { AUTH_ERRORS, BODY_ERRORS, COMMON_ERRORS, errorResponse, GENERIC_FORBIDDEN } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { IDENTITY_TOKEN_SCHEMA, presentIdentityToken } from './identity-tokens.ts';

const dateTime = { type: 'string', format: 'date-time' } as const;
const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;

export const BOT_SCHEMA = {
  type: 'object',
  required: ['id', 'project_id', 'name', 'role', 'created_at'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', pattern: '^bot_[0-9a-z]{20}$' },
    project_id: { type: 'string' },
    name: { type: 'string' },
    role: { type: 'string', enum: BOT_ROLE_NAMES, description: 'Project-scoped.' },
    created_at: dateTime,
  },
} as const;

const BOT_KEY_SCHEMA = {
  type: 'object',
  required: ['id', 'bot_id', 'display_prefix', 'last_four', 'created_at', 'last_used_at', 'revoked_at'],
  additionalProperties: false,
  properties: {
    id: { type: 'string' },
    bot_id: { type: 'string' },
    display_prefix: { type: 'string', description: 'The first characters of the token, e.g. `rpb_1a2b`.' },
    last_four: { type: 'string' },
    created_at: dateTime,
    last_used_at: { ...nullableDateTime, description: 'Accurate to about a minute.' },
    revoked_at: nullableDateTime,
  },
} as const;

/** What `GET /admin/v1/auth/session` answers for a request authenticated by a bot token. */
export const BOT_SESSION_SCHEMA = {
  type: 'object',
  required: ['authenticated_by', 'tenant_id', 'project_id', 'role', 'permissions', 'bot'],
  additionalProperties: false,
  properties: {
    authenticated_by: {
      type: 'string',
      enum: ['bot_token', 'identity_token'],
      description: 'How this request was authenticated: a bot token, or an identity token acting as `bot`.',
    },
    tenant_id: { type: 'string' },
    project_id: { type: 'string', description: 'The bot acts within this project only.' },
    role: { type: 'string', enum: BOT_ROLE_NAMES },
    permissions: {
      type: 'array',
      items: { type: 'string' },
      description:
        "What this principal holds (docs/iam.md): the bot's role within its project, and for an " +
        "identity token only the token's scopes among those.",
    },
    bot: BOT_SCHEMA,
    identity_token: IDENTITY_TOKEN_SCHEMA,
  },
} as const;

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new AppError('internal', `${what} missing from a service response`);
  return value;
}

function botRoleName(b: Bot): BotRoleName {
  const role = roleName(b.role);
  if (role === undefined || !isBotRoleName(role)) {
    throw new AppError('internal', 'a bot with a role other than developer or viewer');
  }
  return role;
}

export function presentBot(b: Bot) {
  return {
    id: b.id,
    project_id: b.projectId,
    name: b.name,
    role: botRoleName(b),
    created_at: required(iso(b.createdAt), 'bot.created_at'),
  };
}

/** What GET /admin/v1/auth/session answers for a bot token or an identity token (its identity). */
export function presentBotSession(principal: Principal, b: Bot, identityToken: IdentityToken | undefined) {
  const bot = presentBot(b);
  const base = {
    tenant_id: b.tenantId,
    project_id: bot.project_id,
    role: bot.role,
    permissions: [...permissionsOf(subjectOf(principal))],
    bot,
  };
  if (!identityToken) return { authenticated_by: 'bot_token' as const, ...base };
  return {
    authenticated_by: 'identity_token' as const,
    ...base,
    identity_token: presentIdentityToken(identityToken),
  };
}

function presentBotKey(k: BotKey) {
  return {
    id: k.id,
    bot_id: k.botId,
    display_prefix: k.displayPrefix,
    last_four: k.lastFour,
    created_at: required(iso(k.createdAt), 'bot_key.created_at'),
    last_used_at: iso(k.lastUsedAt) ?? null,
    revoked_at: iso(k.revokedAt) ?? null,
  };
}

const id = { type: 'string', maxLength: 64 } as const;
const projectParams = {
  type: 'object',
  required: ['project_id'],
  properties: { project_id: id },
} as const;
const botParams = {
  type: 'object',
  required: ['project_id', 'bot_id'],
  properties: { project_id: id, bot_id: id },
} as const;

const NOT_FOUND = errorResponse('The project, bot or key does not exist in the active tenant.');
const FORBIDDEN = errorResponse(GENERIC_FORBIDDEN);

export function registerBots(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  app.get<{ Params: { project_id: string } }>(
    '/admin/v1/projects/:project_id/bots',
    {
      onRequest: guards.allow('bots:read'),
      schema: {
        operationId: 'listBots',
        summary: "List a project's bots (machine identities)",
        description: 'The bots of the project, oldest first.',
        tags: ['bots'],
        security: [{ bearerAuth: [] }],
        params: projectParams,
        response: {
          200: {
            type: 'object',
            required: ['bots'],
            additionalProperties: false,
            properties: { bots: { type: 'array', items: BOT_SCHEMA } },
          },
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listBots({
        principal: principalOf(request),
        projectId: request.params.project_id,
      });
      return { bots: res.bots.map(presentBot) };
    },
  );

  app.post<{ Params: { project_id: string }; Body: { name: string; role?: BotRoleName } }>(
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
        security: [{ bearerAuth: [] }],
        params: projectParams,
        body: {
          type: 'object',
          required: ['name'],
          additionalProperties: false,
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 64 },
            role: { type: 'string', enum: BOT_ROLE_NAMES, default: DEFAULT_BOT_ROLE },
          },
        },
        response: {
          201: BOT_SCHEMA,
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          422: errorResponse("The plan's bot limit is reached: upgrade the plan."),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createBot({
        principal: principalOf(request),
        projectId: request.params.project_id,
        name: request.body.name,
        role: tenantRole(request.body.role ?? DEFAULT_BOT_ROLE),
      });
      if (!res.bot) throw new AppError('internal', 'createBot returned no bot');
      return reply.code(201).send(presentBot(res.bot));
    },
  );

  app.post<{ Params: { project_id: string; bot_id: string } }>(
    '/admin/v1/projects/:project_id/bots/:bot_id/keys',
    {
      onRequest: guards.allow('bots:write'),
      schema: {
        operationId: 'createBotKey',
        summary: 'Create a key for a bot (its bot token, shown once)',
        description:
          'Answers the bot token once, in field `token` (`rpb_…`); only its hash is stored. Send it as ' +
          '`Authorization: Bearer <token>`: it authenticates as the bot, within its project, with its role.',
        tags: ['bots'],
        security: [{ bearerAuth: [] }],
        params: botParams,
        response: {
          201: {
            type: 'object',
            required: ['bot_key', 'token'],
            additionalProperties: false,
            properties: {
              bot_key: BOT_KEY_SCHEMA,
              token: { type: 'string', description: 'The bot token. Shown only here.' },
            },
          },
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createBotKey({
        principal: principalOf(request),
        projectId: request.params.project_id,
        botId: request.params.bot_id,
      });
      if (!res.botKey) throw new AppError('internal', 'createBotKey returned no key');
      return reply.code(201).send({ bot_key: presentBotKey(res.botKey), token: res.token });
    },
  );

  app.get<{ Params: { project_id: string; bot_id: string } }>(
    '/admin/v1/projects/:project_id/bots/:bot_id/keys',
    {
      onRequest: guards.allow('bots:read'),
      schema: {
        operationId: 'listBotKeys',
        summary: "List a bot's keys",
        description:
          'Revoked keys too, newest first. Never shows a token: only its display prefix and last four.',
        tags: ['bots'],
        security: [{ bearerAuth: [] }],
        params: botParams,
        response: {
          200: {
            type: 'object',
            required: ['bot_keys'],
            additionalProperties: false,
            properties: { bot_keys: { type: 'array', items: BOT_KEY_SCHEMA } },
          },
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listBotKeys({
        principal: principalOf(request),
        projectId: request.params.project_id,
        botId: request.params.bot_id,
      });
      return { bot_keys: res.botKeys.map(presentBotKey) };
    },
  );

  app.delete<{ Params: { project_id: string; bot_id: string; key_id: string } }>(
    '/admin/v1/projects/:project_id/bots/:bot_id/keys/:key_id',
    {
      onRequest: guards.allow('bots:write'),
      schema: {
        operationId: 'revokeBotKey',
        summary: 'Revoke a bot key',
        description: 'Idempotent. The token stops authenticating at once.',
        tags: ['bots'],
        security: [{ bearerAuth: [] }],
        params: {
          type: 'object',
          required: ['project_id', 'bot_id', 'key_id'],
          properties: { project_id: id, bot_id: id, key_id: id },
        },
        response: { 200: BOT_KEY_SCHEMA, ...AUTH_ERRORS, 403: FORBIDDEN, 404: NOT_FOUND, ...COMMON_ERRORS },
      },
    },
    async (request) => {
      const res = await clients.admin.revokeBotKey({
        principal: principalOf(request),
        projectId: request.params.project_id,
        botId: request.params.bot_id,
        keyId: request.params.key_id,
      });
      if (!res.botKey) throw new AppError('internal', 'revokeBotKey returned no key');
      return presentBotKey(res.botKey);
    },
  );
}
