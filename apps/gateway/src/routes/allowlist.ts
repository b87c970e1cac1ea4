import { AllowlistEntry } from '../components.ts';
import { inProject } from '../plugins/auth.ts';
import { presentAllowlistEntry, required } from '../present.ts';
import {
  errorResponse,
  noContent,
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

const NOT_FOUND = errorResponse('The project (or entry) does not exist in the active tenant.');

export function registerAllowlist(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/projects/:project_id/allowlist',
    {
      onRequest: guards.allow('allowlist:read'),
      schema: {
        operationId: 'listAllowlistEntries',
        summary: "List a project's IP allowlist",
        description:
          'Empty: API keys of the project work from any address. Oldest entry first (entries of the same ' +
          `instant by network). ${PAGING}`,
        tags: ['allowlist'],
        params: pathParams('project_id'),
        querystring: pageQuery(),
        response: {
          200: pageOf('entries', ref(AllowlistEntry)),
          400: PAGE_BAD_REQUEST,
          404: NOT_FOUND,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listAllowlistEntries({
        ...inProject(request),
        ...pageParams(request.query),
      });
      return { entries: res.entries.map(presentAllowlistEntry), next_cursor: res.nextCursor || null };
    },
  );

  app.post(
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
        params: pathParams('project_id'),
        body: object({ cidr: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: {
          201: ref(AllowlistEntry),
          404: NOT_FOUND,
          409: errorResponse('The network is already in the allowlist.'),
          422: errorResponse("Invalid CIDR notation, or the plan's allowlist entry limit is reached."),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createAllowlistEntry({
        ...inProject(request),
        cidr: request.body.cidr,
      });
      return reply.code(201).send(presentAllowlistEntry(required(res.entry, 'createAllowlistEntry.entry')));
    },
  );

  app.delete(
    '/admin/v1/projects/:project_id/allowlist/:entry_id',
    {
      onRequest: guards.allow('allowlist:write'),
      schema: {
        operationId: 'deleteAllowlistEntry',
        summary: 'Remove an allowlist entry',
        description: 'Effective on every gateway replica within one second.',
        tags: ['allowlist'],
        params: pathParams('project_id', 'entry_id'),
        response: { 204: noContent('Removed.'), 404: NOT_FOUND },
      },
    },
    async (request, reply) => {
      await clients.admin.deleteAllowlistEntry({ ...inProject(request), entryId: request.params.entry_id });
      return reply.code(204).send();
    },
  );
}
