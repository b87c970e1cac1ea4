/** login (device flow), logout, whoami. */
import type { AnySession, BotSession } from '../api-types.ts';
import type { CommandSpec } from '../command.ts';
import { discover, pollForToken, requestDeviceCode } from '../device-flow.ts';
import { ApiError, CliError, EXIT } from '../errors.ts';
import { renderFields, safe } from '../output.ts';

/** A bot token or an identity token: the session names a bot, not a user. */
const isBotSession = (s: AnySession): s is BotSession => 'bot' in s && s.bot !== undefined;

/** One line that says who a token is. */
export function describeSession(s: AnySession): string {
  if (isBotSession(s)) {
    const via = s.identity_token ? `identity token ${s.identity_token.id} of bot` : 'bot';
    return `Authenticated as ${via} ${s.bot.name} (project ${s.project_id}, role ${s.role})`;
  }
  return `Logged in as ${s.user.email} (tenant ${s.tenant.name}, role ${s.role})`;
}

const login: CommandSpec = {
  path: ['login'],
  summary: 'Log in through the browser (OAuth device flow) and save the token',
  description:
    'Prints a code and a URL on stderr: open the URL, log in and approve the code. The token is checked, then\n' +
    'saved with the API URL in the config file (mode 0600). With --json, stdout gets the session JSON.',
  examples: ['relayplane login', 'relayplane login --api-url https://relayplane.example.com'],
  async run(ctx) {
    const metadata = await discover(ctx.api);
    const grant = await requestDeviceCode(ctx.api, metadata.device_authorization_endpoint);
    const s = ctx.errStyle;
    const minutes = Math.max(1, Math.round(grant.expires_in / 60));
    ctx.note(
      [
        '',
        `To log in, open ${s.bold(safe(grant.verification_uri))} in a browser and enter the code:`,
        '',
        `    ${s.bold(safe(grant.user_code))}`,
        '',
        ...(grant.verification_uri_complete
          ? [`(or open ${safe(grant.verification_uri_complete)})`, '']
          : []),
        `Waiting for approval (the code expires in ${minutes} minute${minutes === 1 ? '' : 's'})...`,
        '',
      ].join('\n'),
    );
    const token = await pollForToken(ctx.api, metadata.token_endpoint, grant, ctx.io);
    const auth = { kind: 'bearer' as const, token: token.access_token, fromEnv: false };
    let session: AnySession;
    try {
      session = (await ctx.api.request<AnySession>('GET', '/admin/v1/auth/session', { auth })).body;
    } catch (err) {
      if (err instanceof ApiError) {
        throw new CliError(EXIT.api, `the new token was not accepted: ${err.message}`, 'nothing was saved');
      }
      throw err;
    }
    ctx.config.write({
      ...ctx.saved,
      api_url: ctx.apiUrl,
      token: token.access_token,
      ...(typeof token.expires_in === 'number'
        ? { token_expires_at: new Date(ctx.io.now() + token.expires_in * 1000).toISOString() }
        : {}),
      ...(isBotSession(session) ? {} : { email: session.user.email, tenant: session.tenant.name }),
      saved_at: new Date(ctx.io.now()).toISOString(),
    });
    const line = safe(describeSession(session));
    if (ctx.json) {
      ctx.note(`${ctx.errStyle.green(line)}\n`);
      ctx.print(session, () => '');
    } else {
      ctx.out(`${ctx.style.green(line)}\n`);
    }
    if (ctx.io.env.RELAYPLANE_TOKEN) {
      ctx.note(
        'warning: RELAYPLANE_TOKEN is set and overrides the saved token; unset it to use this login.\n',
      );
    }
  },
};

const logout: CommandSpec = {
  path: ['logout'],
  summary: 'Revoke the token on the server and forget it locally',
  description: 'A token the server no longer accepts (401) is forgotten too.',
  async run(ctx) {
    const envToken = ctx.io.env.RELAYPLANE_TOKEN;
    const token = envToken || (ctx.saved.api_url === ctx.apiUrl ? ctx.saved.token : undefined);
    if (!token) {
      if (ctx.saved.token) {
        ctx.note(`Not logged in to ${ctx.apiUrl} (the saved login is for ${ctx.saved.api_url}).\n`);
      } else {
        ctx.note('Not logged in.\n');
      }
      return;
    }
    try {
      await ctx.api.request('POST', '/admin/v1/auth/logout', {
        auth: { kind: 'bearer', token, fromEnv: Boolean(envToken) },
      });
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) throw err;
    }
    if (ctx.saved.token === token) ctx.config.clearToken();
    if (envToken) {
      ctx.note('The token in RELAYPLANE_TOKEN is revoked; unset the variable.\n');
    }
    if (!ctx.json) ctx.out(`Logged out of ${ctx.apiUrl}.\n`);
  },
};

const whoami: CommandSpec = {
  path: ['whoami'],
  summary: 'Show who the token in use belongs to',
  async run(ctx) {
    const auth = ctx.bearer();
    const { body } = await ctx.api.request<AnySession>('GET', '/admin/v1/auth/session', { auth });
    ctx.print(body, () => {
      const fields: [string, string | boolean | null][] = [['API', ctx.apiUrl]];
      if (isBotSession(body)) {
        fields.push(['Bot', `${body.bot.name} (${body.bot.id})`], ['Project', body.project_id]);
        fields.push(['Tenant', body.tenant_id], ['Role', body.role]);
        if (body.identity_token) {
          fields.push(
            ['Identity token', body.identity_token.id],
            ['Expires', body.identity_token.expires_at],
          );
        }
        fields.push(['Permissions', body.permissions.join(', ')]);
      } else {
        fields.push(['User', `${body.user.email} (${body.user.id})`]);
        fields.push(['Tenant', `${body.tenant.name} (${body.tenant.id})`], ['Role', body.role]);
        fields.push(['Platform admin', body.user.platform_admin], ['Expires', body.expires_at]);
      }
      fields.push(['Token from', auth.fromEnv ? 'RELAYPLANE_TOKEN' : ctx.config.path]);
      return `${safe(describeSession(body))}\n\n${renderFields(fields, ctx.style)}`;
    });
  },
};

export const AUTH_COMMANDS: readonly CommandSpec[] = [login, logout, whoami];
