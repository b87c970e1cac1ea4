/** bots <project_id>, bots create, bots keys create. */
import { BOT_ROLE_NAMES, DEFAULT_BOT_ROLE } from '@relayplane/contract/contract';
import type { Bot, BotKeyCreated } from '../api-types.ts';
import type { CommandSpec, Context, Parsed } from '../command.ts';
import { apiPath } from '../http.ts';
import { renderFields, renderTable } from '../output.ts';
import { fetchAll } from '../paging.ts';
import { idArg, stringValue } from '../parse.ts';

async function listBots(ctx: Context, { positionals }: Parsed, path: readonly string[]): Promise<void> {
  const project = idArg(positionals[0] ?? '', 'project_id', path);
  const body = await fetchAll<'bots', Bot>(
    ctx.api,
    apiPath`/admin/v1/projects/${project}/bots`,
    'bots',
    ctx.bearer(),
  );
  ctx.print(body, () =>
    body.bots.length === 0
      ? `No bots in ${project}. Create one with: relayplane bots create ${project} <name>\n`
      : renderTable(
          ['id', 'name', 'role', 'created'],
          body.bots.map((b) => [b.id, b.name, b.role, b.created_at]),
          ctx.style,
        ),
  );
}

const list: CommandSpec = {
  path: ['bots'],
  summary: "List a project's bots (machine identities)",
  positionals: [{ name: 'project_id' }],
  run: (ctx, args) => listBots(ctx, args, ['bots']),
};

const create: CommandSpec = {
  path: ['bots', 'create'],
  summary: 'Create a bot in a project',
  description: 'Owners and admins only. The role is project-scoped.',
  positionals: [{ name: 'project_id' }, { name: 'name' }],
  options: {
    role: {
      type: 'string',
      value: 'role',
      choices: BOT_ROLE_NAMES,
      description: `what the bot may do in its project (default ${DEFAULT_BOT_ROLE})`,
    },
  },
  async run(ctx, { values, positionals }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const role = stringValue(values, 'role');
    const { body } = await ctx.api.request<Bot>('POST', apiPath`/admin/v1/projects/${project}/bots`, {
      auth: ctx.bearer(),
      json: { name: positionals[1], ...(role ? { role } : {}) },
    });
    ctx.print(
      body,
      () =>
        `${ctx.style.green(`Created bot ${body.name}.`)}\n\n` +
        renderFields(
          [
            ['ID', body.id],
            ['Name', body.name],
            ['Project', body.project_id],
            ['Role', body.role],
            ['Created', body.created_at],
          ],
          ctx.style,
        ) +
        `\nCreate its token with: relayplane bots keys create ${body.project_id} ${body.id}\n`,
    );
  },
};

const createKey: CommandSpec = {
  path: ['bots', 'keys', 'create'],
  summary: 'Create a bot token (shown only once)',
  description: 'The token (rpb_…) authenticates as the bot: send it as `Authorization: Bearer <token>`.',
  positionals: [{ name: 'project_id' }, { name: 'bot_id' }],
  async run(ctx, { positionals }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const bot = idArg(positionals[1] ?? '', 'bot_id', this.path);
    const { body } = await ctx.api.request<BotKeyCreated>(
      'POST',
      apiPath`/admin/v1/projects/${project}/bots/${bot}/keys`,
      { auth: ctx.bearer() },
    );
    ctx.note(
      `${ctx.errStyle.yellow('warning: the bot token is shown only once. Store it now; it cannot be retrieved again.')}\n`,
    );
    ctx.print(
      body,
      () =>
        `${ctx.style.green(`Created key ${body.bot_key.id} for bot ${body.bot_key.bot_id}.`)}\n\n` +
        `Bot token (shown only once):\n\n    ${ctx.style.bold(body.token)}\n\n`,
    );
  },
};

export const BOT_COMMANDS: readonly CommandSpec[] = [
  list,
  {
    ...list,
    path: ['bots', 'list'],
    hidden: true,
    run: (ctx, args) => listBots(ctx, args, ['bots', 'list']),
  },
  create,
  createKey,
];
