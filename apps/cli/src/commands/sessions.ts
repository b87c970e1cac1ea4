/** sessions list, sessions revoke <id>, sessions revoke-others: the logged-in user's sessions and CLI tokens. */
import type { OtherSessionsRevocation, SessionInfo } from '../api-types.ts';
import type { CommandSpec } from '../command.ts';
import { apiPath } from '../http.ts';
import { renderTable } from '../output.ts';
import { fetchAll } from '../paging.ts';
import { idArg } from '../parse.ts';

const list: CommandSpec = {
  path: ['sessions', 'list'],
  summary: 'List your login sessions and CLI tokens',
  description:
    'Every unexpired session of your user, newest first: browser (the session cookie), bearer (a login\n' +
    'token used as a bearer) or cli (a `relayplane login` token), where it came from (IP address and\n' +
    'client), when it was last used (to about a minute) and when it expires. `current` marks the token\n' +
    'this command used. No token is ever shown.',
  examples: ['relayplane sessions list', 'relayplane sessions list --json'],
  async run(ctx) {
    const body = await fetchAll<'sessions', SessionInfo>(
      ctx.api,
      '/admin/v1/auth/sessions',
      'sessions',
      ctx.bearer(),
    );
    ctx.print(body, () =>
      renderTable(
        ['id', 'kind', 'current', 'created', 'last used', 'expires', 'ip', 'client'],
        body.sessions.map((s) => [
          s.id,
          s.kind,
          s.current,
          s.created_at,
          s.last_used_at,
          s.expires_at,
          s.ip,
          s.user_agent,
        ]),
        ctx.style,
      ),
    );
  },
};

const revoke: CommandSpec = {
  path: ['sessions', 'revoke'],
  summary: 'End one of your sessions or CLI tokens',
  description:
    'Its token stops working at once, on every gateway. Ending the session this command uses logs this\n' +
    'CLI out (prefer `relayplane logout`). An id that is not one of your sessions: exit 5 (not found).',
  positionals: [{ name: 'id' }],
  examples: ['relayplane sessions revoke ses_0123456789abcdefghij'],
  async run(ctx, { positionals }) {
    const id = idArg(positionals[0] ?? '', 'id', this.path);
    await ctx.api.request('DELETE', apiPath`/admin/v1/auth/sessions/${id}`, { auth: ctx.bearer() });
    if (!ctx.json) ctx.out(`Ended session ${id}.\n`);
  },
};

const revokeOthers: CommandSpec = {
  path: ['sessions', 'revoke-others'],
  summary: 'Sign out everywhere: end every access but the session this command uses',
  description:
    'Ends every other session and CLI token, device logins approved and not yet redeemed, and the identity ' +
    'tokens rooted at you except those created under this session (--keep-identity-tokens keeps them all). ' +
    'Their tokens stop working at once, on every gateway. With --json: ' +
    '{"revoked": N, "sessions": N, "device_grants": N, "identity_tokens": N}.',
  options: {
    'keep-identity-tokens': { type: 'boolean', description: 'keep the identity tokens rooted at you' },
  },
  async run(ctx, { values }) {
    const { body } = await ctx.api.request<OtherSessionsRevocation>(
      'POST',
      '/admin/v1/auth/sessions/revoke-others',
      {
        auth: ctx.bearer(),
        ...(values['keep-identity-tokens'] === true ? { json: { keep_identity_tokens: true } } : {}),
      },
    );
    const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
    ctx.print(body, () => {
      const also = [
        body.device_grants > 0 ? plural(body.device_grants, 'approved device login') : '',
        body.identity_tokens > 0 ? plural(body.identity_tokens, 'identity token') : '',
      ].filter(Boolean);
      return (
        `Ended ${plural(body.sessions, 'other session')}${also.length > 0 ? ` (and ${also.join(', ')})` : ''}; ` +
        'this one is still logged in.\n'
      );
    });
  },
};

export const SESSION_COMMANDS: readonly CommandSpec[] = [list, revoke, revokeOthers];
