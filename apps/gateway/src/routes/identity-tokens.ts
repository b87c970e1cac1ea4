import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { IdentityToken } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { PERMISSIONS } from '@relayplane/shared/iam';
import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { iso } from '../present.ts';
import { AUTH_ERRORS, BODY_ERRORS, COMMON_ERRORS, errorResponse } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const dateTime = { type: 'string', format: 'date-time' } as const;
const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;
const id = { type: 'string', maxLength: 64 } as const;
const scopes = {
  type: 'array',
  items: { type: 'string', enum: [...PERMISSIONS] },
  description: 'Permissions (docs/iam.md).',
} as const;

/** An identity token as listed: never its value. */
export const IDENTITY_TOKEN_SCHEMA = {
  type: 'object',
  required: [
    'id',
    'identity_id',
    'project_id',
    'scopes',
    'display_prefix',
    'last_four',
    'created_at',
    'expires_at',
    'last_used_at',
    'revoked_at',
  ],
  additionalProperties: false,
  properties: {
    id: { type: 'string' },
    identity_id: { type: 'string', description: 'The bot the token acts as.' },
    project_id: { type: 'string' },
    scopes,
    display_prefix: { type: 'string', description: 'The first 8 characters, `rpi_` + 4.' },
    last_four: { type: 'string' },
    created_at: dateTime,
    expires_at: dateTime,
    last_used_at: nullableDateTime,
    revoked_at: nullableDateTime,
  },
} as const;

export function presentIdentityToken(t: IdentityToken) {
  const createdAt = iso(t.createdAt);
  const expiresAt = iso(t.expiresAt);
  if (!createdAt || !expiresAt) throw new AppError('internal', 'identity token without its times');
  return {
    id: t.id,
    identity_id: t.identityId,
    project_id: t.projectId,
    scopes: t.scopes,
    display_prefix: t.displayPrefix,
    last_four: t.lastFour,
    created_at: createdAt,
    expires_at: expiresAt,
    last_used_at: iso(t.lastUsedAt) ?? null,
    revoked_at: iso(t.revokedAt) ?? null,
  };
}

const identityParams = {
  type: 'object',
  required: ['project_id', 'identity_id'],
  properties: { project_id: id, identity_id: id },
} as const;

const NOT_FOUND = errorResponse('The project, identity (bot) or token does not exist in the active tenant.');
const FORBIDDEN = errorResponse(
  'A bot token or an API key was sent (only a user session or an identity token may call this), or the ' +
    'principal lacks the permission (docs/iam.md), or — on creation — a requested scope is not held by the ' +
    "caller or not granted by the identity's role.",
);
const TOKENS = '/v1/projects/:project_id/identities/:identity_id/tokens';

export function registerIdentityTokens(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  app.post<{
    Params: { project_id: string; identity_id: string };
    Body: { scopes: string[]; expires_at?: string };
  }>(
    TOKENS,
    {
      onRequest: guards.identityCaller('identity_tokens:write'),
      schema: {
        operationId: 'createIdentityToken',
        summary: 'Create an Identity Token for an identity (a bot) of a project',
        description:
          'The token (`rpi_…`, field `value`, shown only here) acts as the identity within its project and holds ' +
          "exactly `scopes`: each must be held by the caller and granted by the identity's role (else 403). " +
          '`expires_at`: at least 60 s and at most 30 days ahead (else 400); default one hour. Callers: a user ' +
          'session or an identity token; a bot token or an API key: 403.',
        tags: ['identity-tokens'],
        security: [{ bearerAuth: [] }],
        params: identityParams,
        body: {
          type: 'object',
          required: ['scopes'],
          additionalProperties: false,
          properties: {
            scopes: { ...scopes, minItems: 1, maxItems: PERMISSIONS.length * 2 },
            expires_at: { ...dateTime, description: 'Default: one hour from now; at most 30 days.' },
          },
        },
        response: {
          201: {
            type: 'object',
            required: ['id', 'created_at', 'scopes', 'value', 'expires_at'],
            additionalProperties: false,
            properties: {
              id: { type: 'string' },
              created_at: dateTime,
              scopes,
              value: { type: 'string', description: 'The token. Shown only here.' },
              expires_at: dateTime,
            },
          },
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const expiresAt =
        request.body.expires_at === undefined ? undefined : Date.parse(request.body.expires_at);
      if (expiresAt !== undefined && Number.isNaN(expiresAt)) {
        throw new AppError('invalid_request', 'expires_at must be an RFC 3339 date-time');
      }
      const res = await clients.admin.createIdentityToken({
        principal: principalOf(request),
        projectId: request.params.project_id,
        identityId: request.params.identity_id,
        scopes: request.body.scopes,
        expiresAt: expiresAt === undefined ? undefined : timestampFromMs(expiresAt),
      });
      if (!res.identityToken) throw new AppError('internal', 'createIdentityToken returned no token');
      const token = presentIdentityToken(res.identityToken);
      return reply.code(201).send({
        id: token.id,
        created_at: token.created_at,
        scopes: token.scopes,
        value: res.value,
        expires_at: token.expires_at,
      });
    },
  );

  app.get<{ Params: { project_id: string; identity_id: string } }>(
    TOKENS,
    {
      onRequest: guards.allow('identity_tokens:read'),
      schema: {
        operationId: 'listIdentityTokens',
        summary: "List an identity's tokens",
        description: 'Revoked and expired ones too, newest first. Never shows a value.',
        tags: ['identity-tokens'],
        security: [{ bearerAuth: [] }],
        params: identityParams,
        response: {
          200: {
            type: 'object',
            required: ['identity_tokens'],
            additionalProperties: false,
            properties: { identity_tokens: { type: 'array', items: IDENTITY_TOKEN_SCHEMA } },
          },
          ...AUTH_ERRORS,
          403: errorResponse('The principal lacks permission `identity_tokens:read` (docs/iam.md).'),
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listIdentityTokens({
        principal: principalOf(request),
        projectId: request.params.project_id,
        identityId: request.params.identity_id,
      });
      return { identity_tokens: res.identityTokens.map(presentIdentityToken) };
    },
  );

  app.delete<{ Params: { project_id: string; identity_id: string; token_id: string } }>(
    `${TOKENS}/:token_id`,
    {
      onRequest: guards.allow('identity_tokens:write'),
      schema: {
        operationId: 'revokeIdentityToken',
        summary: 'Revoke an identity token',
        description: 'Idempotent (answers the first `revoked_at`). The token stops authenticating at once.',
        tags: ['identity-tokens'],
        security: [{ bearerAuth: [] }],
        params: {
          type: 'object',
          required: ['project_id', 'identity_id', 'token_id'],
          properties: { project_id: id, identity_id: id, token_id: id },
        },
        response: {
          200: IDENTITY_TOKEN_SCHEMA,
          ...AUTH_ERRORS,
          403: errorResponse('The principal lacks permission `identity_tokens:write` (docs/iam.md).'),
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.revokeIdentityToken({
        principal: principalOf(request),
        projectId: request.params.project_id,
        identityId: request.params.identity_id,
        tokenId: request.params.token_id,
      });
      if (!res.identityToken) throw new AppError('internal', 'revokeIdentityToken returned no token');
      return presentIdentityToken(res.identityToken);
    },
  );
}
