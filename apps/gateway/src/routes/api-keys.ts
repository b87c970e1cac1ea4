import { CREDENTIAL_SCOPES } from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { presentApiKey } from '../present.ts';
import {
  AUTH_ERRORS,
  BODY_ERRORS,
  COMMON_ERRORS,
  codeList,
  errorResponse,
  GENERIC_FORBIDDEN,
  ref,
} from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const projectParams = {
  type: 'object',
  required: ['project_id'],
  properties: { project_id: { type: 'string', maxLength: 64 } },
} as const;

const NOT_FOUND = errorResponse('The project (or key) does not exist in the active tenant.');
const FORBIDDEN = errorResponse(GENERIC_FORBIDDEN);

export function registerApiKeys(app: FastifyInstance, { clients, guards, forgetApiKey }: RouteDeps): void {
  app.get<{ Params: { project_id: string } }>(
    '/admin/v1/projects/:project_id/api-keys',
    {
      onRequest: guards.allow('api_keys:read'),
      schema: {
        operationId: 'listApiKeys',
        summary: "List a project's API keys",
        description: 'Never shows a key itself: only its display prefix and last four characters.',
        tags: ['api-keys'],
        security: [{ bearerAuth: [] }],
        params: projectParams,
        response: {
          200: {
            type: 'object',
            required: ['api_keys'],
            additionalProperties: false,
            properties: { api_keys: { type: 'array', items: ref('ApiKey') } },
          },
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listApiKeys({
        principal: principalOf(request),
        projectId: request.params.project_id,
      });
      return { api_keys: res.apiKeys.map(presentApiKey) };
    },
  );

  app.post<{ Params: { project_id: string }; Body: { name?: string; mode?: string; scopes?: string[] } }>(
    '/admin/v1/projects/:project_id/api-keys',
    {
      onRequest: guards.allow('api_keys:write'),
      schema: {
        operationId: 'createApiKey',
        summary: 'Create an API key (shown once)',
        description:
          'Answers the key once, in field `key` (`svc_live_` or `svc_test_` + 64 hex); only its hash is stored. ' +
          `\`scopes\` default to all of ${codeList(CREDENTIAL_SCOPES)}. The plan limits active keys: 402.`,
        tags: ['api-keys'],
        security: [{ bearerAuth: [] }],
        params: projectParams,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            name: { type: 'string', maxLength: 64 },
            mode: { type: 'string', enum: ['live', 'test'], default: 'live' },
            scopes: { type: 'array', maxItems: 3, items: { type: 'string', maxLength: 64 } },
          },
        },
        response: {
          201: {
            type: 'object',
            required: ['api_key', 'key'],
            additionalProperties: false,
            properties: {
              api_key: ref('ApiKey'),
              key: { type: 'string', description: 'The key. Shown only here.' },
            },
          },
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          402: errorResponse("The plan's API key limit is reached: upgrade the plan."),
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const body = request.body ?? {};
      const res = await clients.admin.createApiKey({
        principal: principalOf(request),
        projectId: request.params.project_id,
        name: body.name ?? '',
        mode: body.mode ?? 'live',
        scopes: body.scopes ?? [],
      });
      if (!res.apiKey) throw new AppError('internal', 'createApiKey returned no key');
      return reply.code(201).send({ api_key: presentApiKey(res.apiKey), key: res.key });
    },
  );

  app.delete<{ Params: { project_id: string; key_id: string } }>(
    '/admin/v1/projects/:project_id/api-keys/:key_id',
    {
      onRequest: guards.allow('api_keys:write'),
      schema: {
        operationId: 'revokeApiKey',
        summary: 'Revoke an API key',
        description:
          'Idempotent. Effective at once on the gateway replica that answers, and on every other replica within one second.',
        tags: ['api-keys'],
        security: [{ bearerAuth: [] }],
        params: {
          type: 'object',
          required: ['project_id', 'key_id'],
          properties: {
            project_id: { type: 'string', maxLength: 64 },
            key_id: { type: 'string', maxLength: 64 },
          },
        },
        response: { 200: ref('ApiKey'), ...AUTH_ERRORS, 403: FORBIDDEN, 404: NOT_FOUND, ...COMMON_ERRORS },
      },
    },
    async (request) => {
      const res = await clients.admin.revokeApiKey({
        principal: principalOf(request),
        projectId: request.params.project_id,
        keyId: request.params.key_id,
      });
      if (!res.apiKey) throw new AppError('internal', 'revokeApiKey returned no key');
      // At once on this replica, whatever the bus message's timing; others within a second.
      forgetApiKey(res.apiKey.id);
      return presentApiKey(res.apiKey);
    },
  );
}
