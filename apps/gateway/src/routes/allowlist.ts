import { AppError } from '@relayplane/shared/errors';
import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { iso } from '../present.ts';
import {
  AUTH_ERRORS,
  BODY_ERRORS,
  COMMON_ERRORS,
  errorResponse,
  GENERIC_FORBIDDEN,
  ref,
} from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const FORBIDDEN = errorResponse(GENERIC_FORBIDDEN);
const NOT_FOUND = errorResponse('The project (or entry) does not exist in the active tenant.');

function present(e: { id: string; projectId: string; cidr: string; createdAt?: Parameters<typeof iso>[0] }) {
  return { id: e.id, project_id: e.projectId, cidr: e.cidr, created_at: iso(e.createdAt) };
}

export function registerAllowlist(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  const params = {
    type: 'object',
    required: ['project_id'],
    properties: { project_id: { type: 'string', maxLength: 64 } },
  } as const;

  app.get<{ Params: { project_id: string } }>(
    '/admin/v1/projects/:project_id/allowlist',
    {
      onRequest: guards.allow('allowlist:read'),
      schema: {
        operationId: 'listAllowlistEntries',
        summary: "List a project's IP allowlist",
        description: 'Empty: API keys of the project work from any address.',
        tags: ['allowlist'],
        security: [{ bearerAuth: [] }],
        params,
        response: {
          200: {
            type: 'object',
            required: ['entries'],
            additionalProperties: false,
            properties: { entries: { type: 'array', items: ref('AllowlistEntry') } },
          },
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listAllowlistEntries({
        principal: principalOf(request),
        projectId: request.params.project_id,
      });
      return { entries: res.entries.map(present) };
    },
  );

  app.post<{ Params: { project_id: string }; Body: { cidr: string } }>(
    '/admin/v1/projects/:project_id/allowlist',
    {
      onRequest: guards.allow('allowlist:write'),
      schema: {
        operationId: 'createAllowlistEntry',
        summary: 'Add an IPv4 or IPv6 CIDR to the allowlist',
        description:
          'The CIDR is normalised to its network address (`10.1.2.3/16` → `10.1.0.0/16`); a bare address is a ' +
          'single host. Once a project has entries, its API keys work only from those networks (403 otherwise); ' +
          'X-Forwarded-For is believed only from `GATEWAY_TRUSTED_PROXIES`. Duplicate: 409. Invalid CIDR: 422. ' +
          "The plan's entry limit: 422 with a message naming it.",
        tags: ['allowlist'],
        security: [{ bearerAuth: [] }],
        params,
        body: {
          type: 'object',
          required: ['cidr'],
          additionalProperties: false,
          properties: { cidr: { type: 'string', minLength: 1, maxLength: 64 } },
        },
        response: {
          201: ref('AllowlistEntry'),
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          409: errorResponse('The network is already in the allowlist.'),
          422: errorResponse("Invalid CIDR notation, or the plan's allowlist entry limit is reached."),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createAllowlistEntry({
        principal: principalOf(request),
        projectId: request.params.project_id,
        cidr: request.body.cidr,
      });
      if (!res.entry) throw new AppError('internal', 'createAllowlistEntry returned no entry');
      return reply.code(201).send(present(res.entry));
    },
  );

  app.delete<{ Params: { project_id: string; entry_id: string } }>(
    '/admin/v1/projects/:project_id/allowlist/:entry_id',
    {
      onRequest: guards.allow('allowlist:write'),
      schema: {
        operationId: 'deleteAllowlistEntry',
        summary: 'Remove an allowlist entry',
        description: 'Effective on every gateway replica within one second.',
        tags: ['allowlist'],
        security: [{ bearerAuth: [] }],
        params: {
          type: 'object',
          required: ['project_id', 'entry_id'],
          properties: {
            project_id: { type: 'string', maxLength: 64 },
            entry_id: { type: 'string', maxLength: 64 },
          },
        },
        response: {
          204: { description: 'Removed.', type: 'null' },
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: NOT_FOUND,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      await clients.admin.deleteAllowlistEntry({
        principal: principalOf(request),
        projectId: request.params.project_id,
        entryId: request.params.entry_id,
      });
      return reply.code(204).send();
    },
  );
}
