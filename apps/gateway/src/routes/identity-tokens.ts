import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import { PERMISSIONS } from '@relayplane/shared/iam';
import { IdentityToken, PERMISSION_LIST } from '../components.ts';
import { inProject } from '../plugins/auth.ts';
import { presentIdentityToken, required } from '../present.ts';
import {
  dateTime,
  errorResponse,
  object,
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

const NOT_FOUND = errorResponse('The project, identity (bot) or token does not exist in the active tenant.');
const TOKENS = '/v1/projects/:project_id/identities/:identity_id/tokens';

export function registerIdentityTokens(app: Api, { clients, guards }: RouteDeps): void {
  app.post(
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
          'session or an identity token; a bot token or an API key: 403. An identity has at most ' +
          '`ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT` (default 100) unrevoked, unexpired tokens: one more is 422 ' +
          '(revoke one, or wait for one to expire).',
        tags: ['identity-tokens'],
        params: pathParams('project_id', 'identity_id'),
        body: object({
          scopes: { ...PERMISSION_LIST, minItems: 1, maxItems: PERMISSIONS.length * 2 },
          expires_at: Type.Optional(
            dateTime({ description: 'Default: one hour from now; at most 30 days.' }),
          ),
        }),
        response: {
          201: object({
            id: Type.String(),
            created_at: dateTime(),
            scopes: PERMISSION_LIST,
            value: Type.String({ description: 'The token. Shown only here.' }),
            expires_at: dateTime(),
          }),
          403: errorResponse(
            'A bot token or an API key was sent (only a user session or an identity token may call this), or the ' +
              'principal lacks the permission (docs/iam.md), or — on creation — a requested scope is not held by ' +
              "the caller or not granted by the identity's role.",
          ),
          404: NOT_FOUND,
          422: errorResponse(
            'The identity already has the most active tokens an identity may have; the message names the limit.',
          ),
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
        ...inProject(request),
        identityId: request.params.identity_id,
        scopes: request.body.scopes,
        expiresAt: expiresAt === undefined ? undefined : timestampFromMs(expiresAt),
      });
      const token = presentIdentityToken(required(res.identityToken, 'createIdentityToken.identity_token'));
      return reply.code(201).send({
        id: token.id,
        created_at: token.created_at,
        scopes: token.scopes,
        value: res.value,
        expires_at: token.expires_at,
      });
    },
  );

  app.get(
    TOKENS,
    {
      onRequest: guards.allow('identity_tokens:read'),
      schema: {
        operationId: 'listIdentityTokens',
        summary: "List an identity's tokens",
        description: `Revoked and expired ones too, newest first. Never shows a value. ${PAGING}`,
        tags: ['identity-tokens'],
        params: pathParams('project_id', 'identity_id'),
        querystring: pageQuery(),
        response: {
          200: pageOf('identity_tokens', ref(IdentityToken)),
          400: PAGE_BAD_REQUEST,
          404: NOT_FOUND,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listIdentityTokens({
        ...inProject(request),
        identityId: request.params.identity_id,
        ...pageParams(request.query),
      });
      return {
        identity_tokens: res.identityTokens.map(presentIdentityToken),
        next_cursor: res.nextCursor || null,
      };
    },
  );

  app.delete(
    `${TOKENS}/:token_id`,
    {
      onRequest: guards.allow('identity_tokens:write'),
      schema: {
        operationId: 'revokeIdentityToken',
        summary: 'Revoke an identity token',
        description: 'Idempotent (answers the first `revoked_at`). The token stops authenticating at once.',
        tags: ['identity-tokens'],
        params: pathParams('project_id', 'identity_id', 'token_id'),
        response: { 200: ref(IdentityToken), 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.admin.revokeIdentityToken({
        ...inProject(request),
        identityId: request.params.identity_id,
        tokenId: request.params.token_id,
      });
      return presentIdentityToken(required(res.identityToken, 'revokeIdentityToken.identity_token'));
    },
  );
}
