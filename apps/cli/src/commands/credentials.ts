/** credentials issue (with a project API key), credentials revoke. */
import { CREDENTIAL_TTL_SECONDS, DEFAULT_CREDENTIAL_SCOPES } from '@relayplane/contract/contract';
import type { CredentialRevocation, RelayCredential } from '../api-types.ts';
import type { CommandSpec } from '../command.ts';
import { UsageError } from '../errors.ts';
import { apiPath } from '../http.ts';
import { renderFields, renderTable } from '../output.ts';
import { idArg, intValue, listValue, stringValue } from '../parse.ts';

const issue: CommandSpec = {
  path: ['credentials', 'issue'],
  summary: 'Issue a relay credential with a project API key',
  description:
    'The API key comes from RELAYPLANE_API_KEY (preferred: it stays out of shell history) or --api-key;\n' +
    '`--api-key -` reads it from stdin. It is never accepted as an argument. ' +
    `TTL: ${CREDENTIAL_TTL_SECONDS.min}..${CREDENTIAL_TTL_SECONDS.max} s (default ${CREDENTIAL_TTL_SECONDS.default}).`,
  options: {
    'api-key': {
      type: 'string',
      value: 'svc_…',
      description: 'project API key (or env RELAYPLANE_API_KEY; - reads stdin)',
    },
    ttl: { type: 'string', value: 'seconds', description: 'credential lifetime in seconds' },
    scope: {
      type: 'string',
      value: 'scope',
      multiple: true,
      description: `scope to request (default ${DEFAULT_CREDENTIAL_SCOPES.join(', ')})`,
    },
    region: { type: 'string', value: 'region', description: 'region label to prefer for relay assignment' },
  },
  unexpectedArgument:
    'the API key is not accepted as an argument (it would stay in shell history): set RELAYPLANE_API_KEY or pass --api-key',
  examples: ['RELAYPLANE_API_KEY=svc_live_… relayplane credentials issue --ttl 300 --json'],
  async run(ctx, { values }) {
    let key = stringValue(values, 'api-key') ?? ctx.io.env.RELAYPLANE_API_KEY;
    if (key === '-') key = (await ctx.io.readStdin()).trim();
    if (!key) throw new UsageError('no API key: set RELAYPLANE_API_KEY or pass --api-key', this.path);
    if (!/^[\x21-\x7e]+$/.test(key))
      throw new UsageError('the API key contains spaces or control characters', this.path);
    const ttl = intValue(values, 'ttl', this.path);
    const scopes = listValue(values, 'scope');
    const region = stringValue(values, 'region');
    const { body } = await ctx.api.request<RelayCredential>('POST', '/api/v1/credentials', {
      auth: { kind: 'apiKey', key },
      json: {
        ...(ttl !== undefined ? { ttl_seconds: ttl } : {}),
        ...(scopes ? { scopes } : {}),
        ...(region ? { region } : {}),
      },
    });
    ctx.print(body, () => {
      const relays =
        body.relays.length === 0
          ? 'No healthy relays assigned.\n'
          : renderTable(
              ['id', 'region', 'url', 'status'],
              body.relays.map((r) => [r.id, r.region, r.url, r.status]),
              ctx.style,
            );
      return `${renderFields(
        [
          ['JTI', body.jti],
          ['Expires', body.expires_at],
          ['Fallback', body.fallback.join(', ')],
        ],
        ctx.style,
      )}\nRelays:\n${relays}\nCredential:\n${body.token}\n`;
    });
  },
};

const revoke: CommandSpec = {
  path: ['credentials', 'revoke'],
  summary: 'Revoke a relay credential by its jti',
  description: 'Idempotent: revoking again answers the first revocation time.',
  positionals: [{ name: 'jti' }],
  async run(ctx, { positionals }) {
    const jti = idArg(positionals[0] ?? '', 'jti', this.path);
    const { body } = await ctx.api.request<CredentialRevocation>(
      'POST',
      apiPath`/admin/v1/credentials/${jti}/revoke`,
      { auth: ctx.bearer() },
    );
    ctx.print(body, () => `Revoked credential ${body.jti} at ${body.revoked_at}.\n`);
  },
};

export const CREDENTIAL_COMMANDS: readonly CommandSpec[] = [issue, revoke];
