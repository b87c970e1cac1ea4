/**
 * relay-sessions <project_id> [--state live|ended], relay-sessions end <session_id>: the sessions
 * relays admitted through Relayplane (`relayplane sessions` is your own login sessions).
 */
import type { EndedRelaySession, RelaySession } from '../api-types.ts';
import type { CommandSpec } from '../command.ts';
import { UsageError } from '../errors.ts';
import { apiPath } from '../http.ts';
import { renderFields, renderTable } from '../output.ts';
import { fetchAll } from '../paging.ts';
import { idArg, stringValue } from '../parse.ts';

const list: CommandSpec = {
  path: ['relay-sessions'],
  summary: "List a project's relay sessions (live and ended)",
  description:
    "The sessions relays admitted with the project's credentials, newest first: the relay, transport,\n" +
    'client address, role, the credential (jti), when it started, was last revalidated and ended, why,\n' +
    'and what the relay reported (duration, bytes sent and received). Never a credential value.',
  positionals: [{ name: 'project_id' }],
  options: {
    state: { type: 'string', value: 'live|ended', description: 'only live or only ended sessions' },
  },
  examples: ['relayplane relay-sessions prj_0123456789abcdefghij --state live'],
  async run(ctx, { positionals, values }) {
    const project = idArg(positionals[0] ?? '', 'project_id', this.path);
    const state = stringValue(values, 'state');
    if (state !== undefined && state !== 'live' && state !== 'ended')
      throw new UsageError('--state must be live or ended', this.path);
    const path = apiPath`/admin/v1/projects/${project}/sessions`;
    const body = await fetchAll<'sessions', RelaySession>(
      ctx.api,
      state ? `${path}?state=${state}` : path,
      'sessions',
      ctx.bearer(),
    );
    ctx.print(body, () =>
      body.sessions.length === 0
        ? `No ${state ?? ''}${state ? ' ' : ''}relay sessions in ${project}.\n`
        : renderTable(
            [
              'id',
              'relay',
              'transport',
              'remote',
              'role',
              'jti',
              'started',
              'last seen',
              'ended',
              'reason',
              'sent',
              'received',
            ],
            body.sessions.map((s) => [
              s.id,
              s.relay_id,
              s.transport,
              s.remote,
              s.role,
              s.jti,
              s.started_at,
              s.last_seen_at,
              s.ended_at,
              s.reason,
              s.bytes.sent,
              s.bytes.received,
            ]),
            ctx.style,
          ),
    );
  },
};

const end: CommandSpec = {
  path: ['relay-sessions', 'end'],
  summary: 'End a live relay session: its next revalidation is refused',
  description:
    'The relay closes the session within one cadence (15 s by default); its connection slot is free at\n' +
    "once. Audited. Ending an ended session answers it again. Not one of the tenant's: exit 5 (not found).",
  positionals: [{ name: 'session_id' }],
  examples: ['relayplane relay-sessions end 9f86d081884c7d659a2feaa0c55ad015'],
  async run(ctx, { positionals }) {
    const id = idArg(positionals[0] ?? '', 'session_id', this.path);
    const { body } = await ctx.api.request<EndedRelaySession>('POST', apiPath`/admin/v1/sessions/${id}/end`, {
      auth: ctx.bearer(),
    });
    ctx.print(body, () =>
      renderFields(
        [
          ['Session', body.id],
          ['Relay', body.relay_id],
          ['Ended', body.ended_at],
          ['Reason', body.reason],
        ],
        ctx.style,
      ),
    );
  },
};

export const RELAY_SESSION_COMMANDS: readonly CommandSpec[] = [list, end];
