/** Platform administration: relays, signing keys. */
import type { RegisteredRelay, SigningKeyList } from '../api-types.ts';
import type { CommandSpec, Context } from '../command.ts';
import { renderTable } from '../output.ts';

function keysTable(ctx: Context, body: SigningKeyList): string {
  const table = renderTable(
    ['kid', 'state', 'created', 'eligible', 'activated', 'remove after'],
    body.keys.map((k) => [k.kid, k.state, k.created_at, k.eligible_at, k.activated_at, k.remove_after]),
    ctx.style,
  );
  return body.rotation_pending_since
    ? `${table}\nRotation pending since ${body.rotation_pending_since}.\n`
    : table;
}

const relays: CommandSpec = {
  path: ['relays'],
  summary: 'List relays and their health (platform admins)',
  async run(ctx) {
    const { body } = await ctx.api.request<{ relays: RegisteredRelay[] }>('GET', '/admin/v1/relays', {
      auth: ctx.bearer(),
    });
    ctx.print(body, () =>
      body.relays.length === 0
        ? 'No relays.\n'
        : renderTable(
            ['id', 'region', 'host', 'port', 'status', 'load', 'static', 'last heartbeat'],
            body.relays.map((r) => [
              r.id,
              r.region,
              r.host,
              r.port,
              r.status,
              r.load,
              r.static,
              r.last_heartbeat_at,
            ]),
            ctx.style,
          ),
    );
  },
};

const keys: CommandSpec = {
  path: ['keys'],
  summary: 'List signing keys and their state (platform admins)',
  async run(ctx) {
    const { body } = await ctx.api.request<SigningKeyList>('GET', '/admin/v1/signing-keys', {
      auth: ctx.bearer(),
    });
    ctx.print(body, () => keysTable(ctx, body));
  },
};

const rotate: CommandSpec = {
  path: ['keys', 'rotate'],
  summary: 'Rotate the signing key (platform admins)',
  description:
    'The next key becomes active once it has been published for one JWKS cache lifetime (300 s); a younger\n' +
    'next key makes the rotation pending, and it completes by itself.',
  async run(ctx) {
    const res = await ctx.api.request<SigningKeyList>('POST', '/admin/v1/signing-keys/rotate', {
      auth: ctx.bearer(),
    });
    const body = res.body;
    ctx.print(body, () => {
      const next = body.keys.find((k) => k.state === 'next');
      const head =
        res.status === 202
          ? `Rotation pending: the next key starts signing at ${next?.eligible_at ?? 'its eligible time'}.\n\n`
          : `${ctx.style.green('Rotated: a new key is signing.')}\n\n`;
      return head + keysTable(ctx, body);
    });
  },
};

export const PLATFORM_COMMANDS: readonly CommandSpec[] = [
  relays,
  keys,
  { ...keys, path: ['keys', 'list'], hidden: true },
  rotate,
];
