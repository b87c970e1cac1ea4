/**
 * webhooks <project_id> (list), webhooks create|rotate-secret|delete|deliveries|redeliver: a
 * project's webhook endpoints and their delivery log (docs/webhooks.md). The signing secret is
 * printed once, by create and rotate-secret.
 */
import type { WebhookCreated, WebhookDelivery, WebhookEndpoint, WebhookRedelivered } from '../api-types.ts';
import type { CommandSpec, Context, Parsed } from '../command.ts';
import { apiPath } from '../http.ts';
import { renderFields, renderTable } from '../output.ts';
import { fetchAll, PAGE_LIMIT } from '../paging.ts';
import { idArg, intValue, listValue, stringValue } from '../parse.ts';

const ONCE_WARNING =
  'warning: the signing secret is shown only once. Store it where your receiver reads it; it cannot be retrieved again.';

interface Notice {
  type: string;
  endpoint_id: string;
  at: string;
  message: string;
}

async function listEndpoints(ctx: Context, { positionals }: Parsed, path: readonly string[]): Promise<void> {
  const project = idArg(positionals[0] ?? '', 'project_id', path);
  const webhooks: WebhookEndpoint[] = [];
  const notices: Notice[] = [];
  let cursor: string | undefined;
  do {
    const query = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (cursor) query.set('cursor', cursor);
    const { body } = await ctx.api.request<{
      webhooks: WebhookEndpoint[];
      notices: Notice[];
      next_cursor: string | null;
    }>('GET', `${apiPath`/admin/v1/projects/${project}/webhooks`}?${query}`, { auth: ctx.bearer() });
    webhooks.push(...body.webhooks);
    notices.push(...body.notices);
    cursor = body.next_cursor || undefined;
  } while (cursor);
  const body = { webhooks, notices };
  ctx.print(body, () => {
    const warnings = notices.map((n) => `${ctx.style.yellow(`${n.type}:`)} ${n.message}\n`).join('');
    const table =
      webhooks.length === 0
        ? `No webhook endpoints in ${project}. Add one with: relayplane webhooks create ${project} --url https://… --event session.ended\n`
        : renderTable(
            ['id', 'url', 'events', 'enabled', 'failing since', 'created'],
            webhooks.map((w) => [
              w.id,
              w.url,
              w.events.join(','),
              w.enabled ? 'yes' : 'no',
              w.failing_since,
              w.created_at,
            ]),
            ctx.style,
          );
    return `${warnings}${warnings ? '\n' : ''}${table}`;
  });
}

const list: CommandSpec = {
  path: ['webhooks'],
  summary: "List a project's webhook endpoints (never their secrets)",
  description:
    'Also prints what the platform did to an endpoint: one disabled after failing for 3 days says so here\n' +
    'until it is re-enabled.',
  positionals: [{ name: 'project_id' }],
  run: (ctx, args) => listEndpoints(ctx, args, ['webhooks']),
};

function printWithSecret(ctx: Context, body: WebhookCreated, heading: string): void {
  ctx.note(`${ctx.errStyle.yellow(ONCE_WARNING)}\n`);
  ctx.print(body, () => {
    const w = body.webhook;
    return (
      `${ctx.style.green(heading)}\n\n` +
      renderFields(
        [
          ['ID', w.id],
          ['URL', w.url],
          ['Events', w.events.join(', ')],
          ['Enabled', w.enabled ? 'yes' : 'no'],
          ...(w.previous_secret_expires_at
            ? ([['Previous secret signs until', w.previous_secret_expires_at]] as [string, string][])
            : []),
        ],
        ctx.style,
      ) +
      `\nSigning secret (shown only once):\n\n    ${ctx.style.bold(body.secret)}\n\n`
    );
  });
}

const create: CommandSpec = {
  path: ['webhooks', 'create'],
  summary: 'Add a webhook endpoint (its signing secret is shown only once)',
  description:
    'Deliveries are signed per the Standard Webhooks specification: verify them with any Standard Webhooks\n' +
    'library and the secret printed here. The URL must be https and resolve to public addresses.',
  positionals: [{ name: 'project_id' }],
  options: {
    url: { type: 'string', value: 'url', description: 'where to POST the events (https://…)' },
    event: {
      type: 'string',
      value: 'type',
      multiple: true,
      description: 'an event type to receive (repeat it; docs/webhooks.md lists them)',
    },
    description: { type: 'string', value: 'text', description: 'a note for people' },
    disabled: { type: 'boolean', description: 'create it disabled' },
  },
  examples: [
    'relayplane webhooks create prj_… --url https://hooks.example.com/relayplane --event session.started --event session.ended',
  ],
  async run(ctx, { positionals, values }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const description = stringValue(values, 'description');
    const { body } = await ctx.api.request<WebhookCreated>(
      'POST',
      apiPath`/admin/v1/projects/${project}/webhooks`,
      {
        auth: ctx.bearer(),
        json: {
          url: stringValue(values, 'url') ?? '',
          events: listValue(values, 'event') ?? [],
          ...(description !== undefined ? { description } : {}),
          ...(values.disabled === true ? { enabled: false } : {}),
        },
      },
    );
    printWithSecret(ctx, body, `Created webhook endpoint ${body.webhook.id}.`);
  },
};

const rotate: CommandSpec = {
  path: ['webhooks', 'rotate-secret'],
  summary: "Rotate an endpoint's signing secret (the new one is shown only once)",
  description:
    'Until the grace period ends (24 h by default) every delivery is signed with both the old and the new\n' +
    'secret: deploy the new one to the receiver meanwhile.',
  positionals: [{ name: 'project_id' }, { name: 'webhook_id' }],
  options: {
    grace: {
      type: 'string',
      value: 'seconds',
      description: 'how long the old secret keeps signing (at most 604800)',
    },
  },
  async run(ctx, { positionals, values }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const webhook = idArg(positionals[1] ?? '', 'webhook_id', this.path);
    const grace = intValue(values, 'grace', this.path);
    const { body } = await ctx.api.request<WebhookCreated>(
      'POST',
      apiPath`/admin/v1/projects/${project}/webhooks/${webhook}/rotate-secret`,
      { auth: ctx.bearer(), json: grace !== undefined ? { grace_seconds: grace } : {} },
    );
    printWithSecret(ctx, body, `Rotated the signing secret of ${body.webhook.id}.`);
  },
};

const remove: CommandSpec = {
  path: ['webhooks', 'delete'],
  summary: 'Remove a webhook endpoint (and its pending deliveries)',
  positionals: [{ name: 'project_id' }, { name: 'webhook_id' }],
  async run(ctx, { positionals }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const webhook = idArg(positionals[1] ?? '', 'webhook_id', this.path);
    await ctx.api.request('DELETE', apiPath`/admin/v1/projects/${project}/webhooks/${webhook}`, {
      auth: ctx.bearer(),
    });
    ctx.print({ deleted: webhook }, () => `Deleted webhook endpoint ${webhook}.\n`);
  },
};

const deliveries: CommandSpec = {
  path: ['webhooks', 'deliveries'],
  summary: "An endpoint's delivery log, newest first",
  description:
    'Status, attempts, the last answer (status, latency, its first KiB with --json) and the next attempt.',
  positionals: [{ name: 'project_id' }, { name: 'webhook_id' }],
  async run(ctx, { positionals }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const webhook = idArg(positionals[1] ?? '', 'webhook_id', this.path);
    const body = await fetchAll<'deliveries', WebhookDelivery>(
      ctx.api,
      apiPath`/admin/v1/projects/${project}/webhooks/${webhook}/deliveries`,
      'deliveries',
      ctx.bearer(),
    );
    ctx.print(body, () =>
      body.deliveries.length === 0
        ? `No deliveries to ${webhook} yet.\n`
        : renderTable(
            [
              'id',
              'event',
              'message',
              'status',
              'attempts',
              'answer',
              'ms',
              'error',
              'next attempt',
              'created',
            ],
            body.deliveries.map((d) => [
              d.id,
              d.event_type,
              d.message_id,
              d.status,
              d.attempts,
              d.response_status,
              d.latency_ms,
              d.error,
              d.next_attempt_at,
              d.created_at,
            ]),
            ctx.style,
          ),
    );
  },
};

const redeliver: CommandSpec = {
  path: ['webhooks', 'redeliver'],
  summary: "Send a delivery's message again (the same webhook-id)",
  positionals: [{ name: 'project_id' }, { name: 'webhook_id' }, { name: 'delivery_id' }],
  async run(ctx, { positionals }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const webhook = idArg(positionals[1] ?? '', 'webhook_id', this.path);
    const delivery = idArg(positionals[2] ?? '', 'delivery_id', this.path);
    const { body } = await ctx.api.request<WebhookRedelivered>(
      'POST',
      apiPath`/admin/v1/projects/${project}/webhooks/${webhook}/deliveries/${delivery}/redeliver`,
      { auth: ctx.bearer() },
    );
    ctx.print(
      body,
      () =>
        `Queued ${body.delivery.message_id} (${body.delivery.event_type}) again as delivery ${body.delivery.id}.\n`,
    );
  },
};

export const WEBHOOK_COMMANDS: readonly CommandSpec[] = [
  {
    ...list,
    path: ['webhooks', 'list'],
    run: (ctx, args) => listEndpoints(ctx, args, ['webhooks', 'list']),
  },
  { ...list, hidden: true },
  create,
  rotate,
  remove,
  deliveries,
  redeliver,
];
