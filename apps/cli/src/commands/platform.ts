/** Platform administration: relays, signing keys. */
import type {
  RegisteredRelay,
  SigningKeyList,
  SigningKeyRevocation,
  SigningKeyRotation,
} from '../api-types.ts';
import type { CommandSpec, Context } from '../command.ts';
import { CliError, EXIT, UsageError } from '../errors.ts';
import { apiPath } from '../http.ts';
import { renderTable } from '../output.ts';
import { idArg } from '../parse.ts';

/** The largest page the API answers: the fewest requests for a whole list. */
const PAGE_LIMIT = 200;

/** A page of a paged list: its items and the cursor of the next page (null on the last). */
type Paged = { next_cursor?: string | null };

/**
 * Reads every page of a paged list (`limit` 200, following `next_cursor`; as `fetchAll` in
 * paging.ts, but keeping the first page's other fields, such as `rotation_pending_since`):
 * `append` adds a later page's items to the first page's body. Answers the body in the shape
 * the API gave before it paged (no `next_cursor`).
 */
async function everyPage<B extends Paged>(
  ctx: Context,
  path: string,
  append: (into: B, page: B) => void,
): Promise<Omit<B, 'next_cursor'>> {
  const get = async (cursor?: string) => {
    const query = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (cursor) query.set('cursor', cursor);
    return (await ctx.api.request<B>('GET', `${path}?${query}`, { auth: ctx.bearer() })).body;
  };
  const { next_cursor: first, ...body } = await get();
  const seen = new Set<string>();
  // A gateway from before paging answers everything, without a cursor.
  for (let cursor = first; cursor; ) {
    // A server that answered one cursor twice would otherwise keep this loop going for ever.
    if (seen.has(cursor)) {
      throw new CliError(EXIT.api, `the API answered the same next_cursor twice while listing ${path}`);
    }
    seen.add(cursor);
    const page = await get(cursor);
    append(body as B, page);
    cursor = page.next_cursor;
  }
  return body;
}

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
  description: 'Every relay: the command reads every page of the list (200 a request).',
  async run(ctx) {
    const body = await everyPage<{ relays: RegisteredRelay[] } & Paged>(
      ctx,
      '/admin/v1/relays',
      (into, page) => into.relays.push(...page.relays),
    );
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
  description: 'Every key, removed ones too: the command reads every page of the list (200 a request).',
  async run(ctx) {
    const body = await everyPage<SigningKeyList & Paged>(ctx, '/admin/v1/signing-keys', (into, page) =>
      into.keys.push(...page.keys),
    );
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
    const res = await ctx.api.request<SigningKeyRotation>('POST', '/admin/v1/signing-keys/rotate', {
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

const revokeKey: CommandSpec = {
  path: ['keys', 'revoke'],
  summary: 'Revoke a compromised signing key (platform admins; asks for --yes)',
  description:
    'An emergency, not a rotation: the key leaves the JWKS at once and its private half is destroyed;\n' +
    'every credential it signed is refused from then on (relays refuse them through the revocation feed).\n' +
    'When it was the active key, the next key (or a new one) signs at once. It cannot be undone, hence\n' +
    '--yes. Revoking a revoked key changes nothing and says so.',
  positionals: [{ name: 'kid' }],
  options: {
    yes: { type: 'boolean', description: 'confirm: revoke the key and every credential it signed' },
  },
  examples: ['relayplane keys revoke 3f9c… --yes'],
  async run(ctx, { positionals, values }) {
    const kid = idArg(positionals[0] ?? '', 'kid', this.path);
    if (values.yes !== true) {
      throw new UsageError(
        `revoking ${kid} refuses every credential it signed and cannot be undone: add --yes to go ahead`,
        this.path,
      );
    }
    const { body } = await ctx.api.request<SigningKeyRevocation>(
      'POST',
      apiPath`/admin/v1/signing-keys/${kid}/revoke`,
      { auth: ctx.bearer() },
    );
    ctx.print(body, () => {
      const head = body.already_revoked
        ? `${body.revoked.kid} was already revoked (at ${body.revoked.revoked_at}): nothing changed.\n`
        : `${ctx.style.green(`Revoked ${body.revoked.kid}`)} at ${body.revoked.revoked_at}: its credentials are refused from now on.\n`;
      const active = body.active
        ? `Signing now: ${body.active.kid} (${body.active.state}).\n`
        : `${ctx.style.red('No key signs now')}: issuance answers 503 until the issuer makes one.\n`;
      return head + active;
    });
  },
};

export const PLATFORM_COMMANDS: readonly CommandSpec[] = [
  relays,
  keys,
  { ...keys, path: ['keys', 'list'], hidden: true },
  rotate,
  revokeKey,
];
