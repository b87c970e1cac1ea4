import { DEFAULT_PROJECT_ENVIRONMENT, PROJECT_ENVIRONMENTS } from '@relayplane/contract/contract';
import { Project } from '../components.ts';
import { inProject, principalOf } from '../plugins/auth.ts';
import { presentProject, required } from '../present.ts';
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

export function registerProjects(app: Api, { clients, guards }: RouteDeps): void {
  app.post(
    '/admin/v1/projects',
    {
      onRequest: guards.allow('projects:write'),
      schema: {
        operationId: 'createProject',
        summary: 'Create a project in the active tenant',
        description:
          '`name`: 1–64 characters, lowercase letters, digits and hyphens, starting with a letter or digit; unique ' +
          'in the tenant (409). `environment`: `production` (default), `staging` or `development`. Over the ' +
          "plan's project limit: 422. The contract lists an API-key scheme on this operation and accepts a bot " +
          'token: both answer 403 — an API key authenticates credential issuance only (it is not even looked up ' +
          'here), and ' +
          '`projects:write` is tenant-wide, never held by bots (docs/iam.md).',
        tags: ['projects'],
        // The contract's schemes for this operation (see the description).
        security: [{ bearerAuth: [] }, { apiKey: [] }],
        body: object({
          name: Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9][a-z0-9-]*$' }),
          environment: Type.Optional(oneOf(PROJECT_ENVIRONMENTS, { default: DEFAULT_PROJECT_ENVIRONMENT })),
        }),
        response: {
          201: ref(Project),
          409: errorResponse('A project with this name exists in the tenant.'),
          422: errorResponse(
            "The plan's project limit is reached (max_projects); the message names limit and plan.",
          ),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.createProject({
        principal: principalOf(request),
        name: request.body.name,
        environment: request.body.environment ?? DEFAULT_PROJECT_ENVIRONMENT,
      });
      return reply.code(201).send(presentProject(required(res.project, 'createProject.project')));
    },
  );

  app.get(
    '/admin/v1/projects',
    {
      onRequest: guards.allow('projects:read'),
      schema: {
        operationId: 'listProjects',
        summary: 'List the projects of the active tenant',
        description: `Oldest first; a bot or an identity token sees its own project only. ${PAGING}`,
        tags: ['projects'],
        querystring: pageQuery(),
        response: { 200: pageOf('projects', ref(Project)), 400: PAGE_BAD_REQUEST },
      },
    },
    async (request) => {
      const res = await clients.admin.listProjects({
        principal: principalOf(request),
        ...pageParams(request.query),
      });
      return { projects: res.projects.map(presentProject), next_cursor: res.nextCursor || null };
    },
  );

  app.get(
    '/admin/v1/projects/:project_id',
    {
      onRequest: guards.allow('projects:read'),
      schema: {
        operationId: 'getProject',
        summary: 'Get one project of the active tenant',
        description:
          "A bot or an identity token reads its own project only. Another tenant's project answers 404, like a " +
          'missing one.',
        tags: ['projects'],
        params: pathParams('project_id'),
        response: {
          200: ref(Project),
          404: errorResponse('The project does not exist in the active tenant.'),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.getProject(inProject(request));
      return presentProject(required(res.project, 'getProject.project'));
    },
  );
}
