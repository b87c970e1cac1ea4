/**
 * Containment of a leaked API key (docs/credentials.md, "Containment"): revoking a project's
 * credentials in bulk, by API key and/or issue time, and listing them.
 */
import { AppError } from '@relayplane/contract/errors';
import { inProject, principalOf } from '../plugins/auth.ts';
import { iso, required } from '../present.ts';
import {
  dateTime,
  errorResponse,
  nullable,
  nullableDateTime,
  object,
  oneOf,
  pathParams,
  Type,
} from '../schemas.ts';
import { listProjectCredentials, revokeProjectCredentials } from '../workflows/credentials.ts';
import type { Api, RouteDeps } from './deps.ts';

const NOT_FOUND = errorResponse(
  'The project does not exist in the active tenant, or the API key is not one of its keys.',
);

export function registerCredentialContainment(app: Api, { clients, guards }: RouteDeps): void {
  app.post(
    '/admin/v1/projects/:project_id/credentials/revoke',
    {
      onRequest: guards.allow('credentials:revoke'),
      schema: {
        operationId: 'revokeProjectCredentials',
        summary: "Revoke a project's credentials in bulk (a leaked API key)",
        description:
          'Revokes every unexpired, unrevoked credential of the project requested with `api_key_id` and/or issued ' +
          'before `issued_before` (RFC 3339, not in the future; rounded up to a whole second, as `iat` is) — at ' +
          'least one of the two — in one transaction. Each is refused at assignment on every gateway at once, ' +
          'reported inactive by introspection, listed in the revocation feed, and its connection slot is freed. ' +
          'With `api_key_id` only the credentials the key holds now are revoked: the key itself stays active and ' +
          'obtains new credentials (revoke the key with `DELETE …/api-keys/{key_id}` to stop that). `issued_before` ' +
          "also becomes the project's watermark (only ever raised): the revocation feed carries it in `watermarks`, and " +
          "assignment, introspection and `@relayplane/verifier` refuse the project's credentials with `iat` before it " +
          'even without a revocation entry. Answers how many credentials this call revoked (a repeat: 0). Recorded ' +
          'as the audit event `credentials.bulk_revoke`.',
        tags: ['credentials'],
        params: pathParams('project_id'),
        body: object({
          api_key_id: Type.Optional(
            Type.String({ maxLength: 64, description: 'Only credentials requested with this key.' }),
          ),
          issued_before: Type.Optional(
            Type.String({
              maxLength: 64,
              description:
                'RFC 3339 with a time zone: only credentials issued before it. An impossible date (2026-02-31) is 400.',
            }),
          ),
        }),
        response: {
          200: object({ revoked: Type.Integer({ description: 'Credentials revoked by this call.' }) }),
          400: errorResponse(
            'Neither `api_key_id` nor `issued_before`, `issued_before` not an RFC 3339 date-time (or an impossible ' +
              'date) or in the future, or a malformed body.',
          ),
          404: NOT_FOUND,
        },
      },
    },
    async (request) => {
      const body = request.body ?? {};
      // A body without either field is malformed (400, like any missing field, before the project is looked
      // up); then the project: another tenant's answers 404 whatever else the body says, like a missing one.
      if (body.api_key_id === undefined && body.issued_before === undefined) {
        throw new AppError(
          'invalid_request',
          'missing required field: give api_key_id, issued_before or both',
        );
      }
      const revoked = await revokeProjectCredentials(clients, {
        ...inProject(request),
        tenantId: principalOf(request).tenantId,
        apiKeyId: body.api_key_id,
        issuedBefore: body.issued_before,
      });
      return { revoked };
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/credentials',
    {
      onRequest: guards.allow('api_keys:read'),
      schema: {
        operationId: 'listProjectCredentials',
        summary: "List a project's relay credentials",
        description:
          'Newest first (by `issued_at`). Never a token: only its `jti`, the API key that requested it and its ' +
          'times. `api_key_id` filters by key (an id that is not an API key id, `key_…`, is 400; one the project ' +
          'does not have lists nothing); `active=true` keeps only unexpired, unrevoked credentials. `limit` ' +
          '1..200 (default 50); pass `next_cursor` as `cursor` for the next page (`null`: the last page). Permission ' +
          "`api_keys:read` (credentials are what a project's API keys requested; docs/iam.md).",
        tags: ['credentials'],
        params: pathParams('project_id'),
        querystring: object({
          api_key_id: Type.Optional(Type.String({ maxLength: 64 })),
          active: Type.Optional(oneOf(['true', 'false'])),
          limit: Type.Optional(Type.String({ pattern: '^([1-9][0-9]?|1[0-9]{2}|200)$' })),
          cursor: Type.Optional(Type.String({ maxLength: 256 })),
        }),
        response: {
          200: object({
            credentials: Type.Array(
              object({
                jti: Type.String(),
                api_key_id: Type.String(),
                issued_at: dateTime(),
                expires_at: dateTime(),
                revoked_at: nullableDateTime(),
              }),
            ),
            next_cursor: nullable(Type.String({ description: 'Null on the last page.' })),
          }),
          400: errorResponse(
            'A malformed query parameter (`api_key_id` not an API key id), or a `cursor` this API did not return.',
          ),
          404: errorResponse('The project does not exist in the active tenant.'),
        },
      },
    },
    async (request) => {
      const query = request.query;
      const res = await listProjectCredentials(clients, {
        ...inProject(request),
        tenantId: principalOf(request).tenantId,
        apiKeyId: query.api_key_id ?? '',
        active: query.active === 'true',
        limit: Number(query.limit ?? 0),
        cursor: query.cursor ?? '',
      });
      return {
        credentials: res.credentials.map((c) => ({
          jti: c.jti,
          api_key_id: c.apiKeyId,
          issued_at: required(iso(c.issuedAt), 'credential.issued_at'),
          expires_at: required(iso(c.expiresAt), 'credential.expires_at'),
          revoked_at: iso(c.revokedAt) ?? null,
        })),
        next_cursor: res.nextCursor || null,
      };
    },
  );
}
