/** projects, projects create. */
import { PROJECT_ENVIRONMENTS } from '@relayplane/contract/contract';
import type { Project } from '../api-types.ts';
import type { CommandSpec, Context } from '../command.ts';
import { renderFields, renderTable } from '../output.ts';
import { fetchAll } from '../paging.ts';
import { stringValue } from '../parse.ts';

async function listProjects(ctx: Context): Promise<void> {
  const body = await fetchAll<'projects', Project>(ctx.api, '/admin/v1/projects', 'projects', ctx.bearer());
  ctx.print(body, () =>
    body.projects.length === 0
      ? 'No projects yet. Create one with: relayplane projects create <name>\n'
      : renderTable(
          ['id', 'name', 'environment', 'created'],
          body.projects.map((p) => [p.id, p.name, p.environment, p.created_at]),
          ctx.style,
        ),
  );
}

const list: CommandSpec = {
  path: ['projects'],
  summary: 'List the projects of your tenant',
  run: (ctx) => listProjects(ctx),
};

const create: CommandSpec = {
  path: ['projects', 'create'],
  summary: 'Create a project',
  description:
    'Names: 1-64 characters, lowercase letters, digits and hyphens, starting with a letter or digit; unique in the tenant.',
  positionals: [{ name: 'name' }],
  options: {
    environment: {
      type: 'string',
      value: 'env',
      choices: PROJECT_ENVIRONMENTS,
      description: 'deployment environment (default production)',
    },
  },
  examples: ['relayplane projects create demo', 'relayplane projects create web --environment staging'],
  async run(ctx, { values, positionals }) {
    const environment = stringValue(values, 'environment');
    const { body } = await ctx.api.request<Project>('POST', '/admin/v1/projects', {
      auth: ctx.bearer(),
      json: { name: positionals[0], ...(environment ? { environment } : {}) },
    });
    ctx.print(
      body,
      () =>
        `${ctx.style.green(`Created project ${body.name}.`)}\n\n` +
        renderFields(
          [
            ['ID', body.id],
            ['Name', body.name],
            ['Environment', body.environment],
            ['Tenant', body.tenant_id],
            ['Created', body.created_at],
          ],
          ctx.style,
        ),
    );
  },
};

export const PROJECT_COMMANDS: readonly CommandSpec[] = [
  list,
  { ...list, path: ['projects', 'list'], hidden: true },
  create,
];
