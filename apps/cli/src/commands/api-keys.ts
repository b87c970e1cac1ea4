/** api-keys <project_id>, api-keys create, api-keys revoke. */
import { CREDENTIAL_SCOPES, KEY_MODE_NAMES, KEY_MODES } from '@relayplane/contract/contract';
import type { ApiKey, ApiKeyCreated } from '../api-types.ts';
import type { CommandSpec, Context, Parsed } from '../command.ts';
import { apiPath } from '../http.ts';
import { renderFields, renderTable } from '../output.ts';
import { fetchAll } from '../paging.ts';
import { idArg, listValue, stringValue } from '../parse.ts';

const ONCE_WARNING = 'warning: the API key is shown only once. Store it now; it cannot be retrieved again.';

const keyShape = (k: Pick<ApiKey, 'display_prefix' | 'last_four'>) => `${k.display_prefix}…${k.last_four}`;

async function listKeys(ctx: Context, { positionals }: Parsed, path: readonly string[]): Promise<void> {
  const project = idArg(positionals[0] ?? '', 'project_id', path);
  const body = await fetchAll<'api_keys', ApiKey>(
    ctx.api,
    apiPath`/admin/v1/projects/${project}/api-keys`,
    'api_keys',
    ctx.bearer(),
  );
  ctx.print(body, () =>
    body.api_keys.length === 0
      ? `No API keys in ${project}. Create one with: relayplane api-keys create ${project}\n`
      : renderTable(
          ['id', 'name', 'mode', 'key', 'scopes', 'created', 'last used', 'revoked'],
          body.api_keys.map((k) => [
            k.id,
            k.name,
            k.mode,
            keyShape(k),
            k.scopes.join(','),
            k.created_at,
            k.last_used_at,
            k.revoked_at,
          ]),
          ctx.style,
        ),
  );
}

const list: CommandSpec = {
  path: ['api-keys'],
  summary: "List a project's API keys (never the keys themselves)",
  positionals: [{ name: 'project_id' }],
  run: (ctx, args) => listKeys(ctx, args, ['api-keys']),
};

const create: CommandSpec = {
  path: ['api-keys', 'create'],
  summary: 'Create an API key for a project (the key is shown only once)',
  description:
    'The key (svc_live_… or svc_test_…) is printed once; store it in a secret manager. Scopes default to all\n' +
    `of ${CREDENTIAL_SCOPES.join(', ')}.`,
  positionals: [{ name: 'project_id' }],
  options: {
    name: { type: 'string', value: 'name', description: 'a label for the key' },
    mode: {
      type: 'string',
      value: 'mode',
      choices: KEY_MODE_NAMES,
      description: `${KEY_MODES.live} (default) or ${KEY_MODES.test} key`,
    },
    scope: {
      type: 'string',
      value: 'scope',
      multiple: true,
      description: `a scope the key may request (${CREDENTIAL_SCOPES.join(', ')})`,
    },
  },
  examples: [
    'relayplane api-keys create prj_… --name backend',
    'KEY=$(relayplane api-keys create prj_… --json | jq -r .key)',
  ],
  async run(ctx, { values, positionals }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const name = stringValue(values, 'name');
    const mode = stringValue(values, 'mode');
    const scopes = listValue(values, 'scope');
    const { body } = await ctx.api.request<ApiKeyCreated>(
      'POST',
      apiPath`/admin/v1/projects/${project}/api-keys`,
      {
        auth: ctx.bearer(),
        json: { ...(name ? { name } : {}), ...(mode ? { mode } : {}), ...(scopes ? { scopes } : {}) },
      },
    );
    ctx.note(`${ctx.errStyle.yellow(ONCE_WARNING)}\n`);
    ctx.print(body, () => {
      const k = body.api_key;
      return (
        `${ctx.style.green(`Created API key ${k.id}.`)}\n\n` +
        renderFields(
          [
            ['ID', k.id],
            ['Name', k.name],
            ['Project', k.project_id],
            ['Mode', k.mode],
            ['Scopes', k.scopes.join(', ')],
          ],
          ctx.style,
        ) +
        `\nAPI key (shown only once):\n\n    ${ctx.style.bold(body.key)}\n\n`
      );
    });
  },
};

const revoke: CommandSpec = {
  path: ['api-keys', 'revoke'],
  summary: 'Revoke an API key',
  positionals: [{ name: 'project_id' }, { name: 'key_id' }],
  async run(ctx, { positionals }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const key = idArg(positionals[1] ?? '', 'key_id', this.path);
    const { body } = await ctx.api.request<ApiKey>(
      'DELETE',
      apiPath`/admin/v1/projects/${project}/api-keys/${key}`,
      { auth: ctx.bearer() },
    );
    ctx.print(body, () => `Revoked API key ${body.id} (${keyShape(body)}) at ${body.revoked_at ?? 'now'}.\n`);
  },
};

export const API_KEY_COMMANDS: readonly CommandSpec[] = [
  list,
  {
    ...list,
    path: ['api-keys', 'list'],
    hidden: true,
    run: (ctx, args) => listKeys(ctx, args, ['api-keys', 'list']),
  },
  create,
  revoke,
];
