import { CREDENTIAL_SCOPES, DEFAULT_KEY_MODE, KEY_MODE_NAMES } from '@relayplane/contract/contract';
import { ApiKey, PATH_ROOT, PATTERN_LIST } from '../components.ts';
import { inProject, principalOf } from '../plugins/auth.ts';
import { presentApiKey, required } from '../present.ts';
import {
  codeList,
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
import { revokeApiKeyAndCredentials } from '../workflows/api-keys.ts';
import type { Api, RouteDeps } from './deps.ts';

const NOT_FOUND = errorResponse('The project (or key) does not exist in the active tenant.');

export function registerApiKeys(app: Api, { clients, guards, forgetApiKey }: RouteDeps): void {
  app.get(
    '/admin/v1/projects/:project_id/api-keys',
    {
      onRequest: guards.allow('api_keys:read'),
      schema: {
        operationId: 'listApiKeys',
        summary: "List a project's API keys",
        description:
          'Never shows a key itself: only its display prefix and last four characters. Revoked keys too, newest ' +
          `first. ${PAGING}`,
        tags: ['api-keys'],
        params: pathParams('project_id'),
        querystring: pageQuery(),
        response: { 200: pageOf('api_keys', ref(ApiKey)), 400: PAGE_BAD_REQUEST, 404: NOT_FOUND },
      },
    },
    async (request) => {
      const res = await clients.admin.listApiKeys({ ...inProject(request), ...pageParams(request.query) });
      return { api_keys: res.apiKeys.map(presentApiKey), next_cursor: res.nextCursor || null };
    },
  );

  app.post(
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
        params: pathParams('project_id'),
        body: object({
          name: Type.Optional(Type.String({ maxLength: 64 })),
          mode: Type.Optional(oneOf(KEY_MODE_NAMES, { default: DEFAULT_KEY_MODE })),
          scopes: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 3 })),
          ceiling: Type.Optional(
            object(
              {
                root: Type.Optional(PATH_ROOT),
                publish: Type.Optional(PATTERN_LIST),
                subscribe: Type.Optional(PATTERN_LIST),
              },
              {
                description:
                  'Optional: the paths every credential of the key is bounded by (a root and moq patterns per role; ' +
                  "it must name some). A malformed one: 400. Fixed for the key's life.",
              },
            ),
          ),
        }),
        response: {
          201: object({
            api_key: ref(ApiKey),
            key: Type.String({ description: 'The key. Shown only here.' }),
          }),
          402: errorResponse("The plan's API key limit is reached: upgrade the plan."),
          404: NOT_FOUND,
        },
      },
    },
    async (request, reply) => {
      const body = request.body ?? {};
      const res = await clients.admin.createApiKey({
        ...inProject(request),
        name: body.name ?? '',
        mode: body.mode ?? DEFAULT_KEY_MODE,
        scopes: body.scopes ?? [],
        ...(body.ceiling
          ? {
              ceiling: {
                root: body.ceiling.root ?? '',
                publish: body.ceiling.publish ?? [],
                subscribe: body.ceiling.subscribe ?? [],
              },
            }
          : {}),
      });
      const apiKey = required(res.apiKey, 'createApiKey.api_key');
      return reply.code(201).send({ api_key: presentApiKey(apiKey), key: res.key });
    },
  );

  app.delete(
    '/admin/v1/projects/:project_id/api-keys/:key_id',
    {
      onRequest: guards.allow('api_keys:write'),
      schema: {
        operationId: 'revokeApiKey',
        summary: 'Revoke an API key and every credential issued with it',
        description:
          'Idempotent. The key is refused at once on the gateway replica that answers, and on every other replica ' +
          'within one second. In the same call every unexpired credential issued with the key is revoked ' +
          '(`credentials.bulk_revoke`): refused at assignment, inactive at introspection, listed in the revocation ' +
          'feed, its connection slot freed; and no credential of the key is issued afterwards, even by a gateway ' +
          'that still trusts the key from its one-second cache. Answers 200 with the key (as before) and ' +
          '`revoked_credentials`, how many credentials this call revoked (a repeat: 0) — the issue allowed 204 or ' +
          '200; 200 keeps the key fields earlier clients read. Order: the credentials first (and the key recorded as ' +
          'revoked where credentials are issued, so it obtains none from then on), then the key itself. A 503 ' +
          "before the first step changed nothing; a 503 after it says so (the key's credentials are revoked, the key " +
          'is not yet): retry the call — both steps are idempotent (the retry counts 0 credentials for those already ' +
          'revoked). The key is looked up first, so the caller needs `api_keys:read` too (every role holding ' +
          '`api_keys:write` has it).',
        tags: ['api-keys'],
        params: pathParams('project_id', 'key_id'),
        response: {
          200: object({
            // The key as every other operation shows it, plus what this call revoked.
            ...ApiKey.properties,
            revoked_credentials: Type.Integer({
              description:
                'Credentials of the key revoked by this call (already revoked or expired ones are not counted).',
            }),
          }),
          404: NOT_FOUND,
          503: errorResponse(
            "A service could not be reached. If the key's credentials were revoked before the failure, the message " +
              'says so. Retry the call (idempotent).',
          ),
        },
      },
    },
    async (request) => {
      const { apiKey, revokedCredentials } = await revokeApiKeyAndCredentials(clients, {
        ...inProject(request),
        tenantId: principalOf(request).tenantId,
        keyId: request.params.key_id,
      });
      // At once on this replica, whatever the bus message's timing; others within a second.
      forgetApiKey(apiKey.id);
      return { ...presentApiKey(apiKey), revoked_credentials: revokedCredentials };
    },
  );
}
