/**
 * A project's relay sessions, live or ended (`?state=ended`), newest first; ending a live one
 * (POST /admin/v1/sessions/{id}/end: the relay closes it at its next revalidation).
 */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, must } from '../../api.ts';
import { paths } from '../../routes.ts';
import { can, useSession } from '../../session.tsx';
import {
  Badge,
  Confirm,
  Done,
  Empty,
  ErrorNote,
  More,
  Table,
  Time,
  useAction,
  usePaged,
} from '../../ui/kit.tsx';
import type { TabProps } from './tab.ts';

interface RelaySession {
  id: string;
  relay_id: string;
  transport: string;
  remote: string | null;
  role: string | null;
  jti: string;
  started_at: string;
  ended_at: string | null;
  reason: string | null;
  duration_seconds: number | null;
  bytes: { sent: number; received: number };
}

type State = 'live' | 'ended';

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
function formatBytes(n: number): string {
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return `${m} min ${r} s`;
  return `${r} s`;
}

/**
 * The relay's reported duration; a session ended here (or whose relay reported none) counts from
 * its start to its end, or to now while it is live.
 */
function duration(s: RelaySession): string {
  if (s.duration_seconds !== null && s.duration_seconds > 0) return formatDuration(s.duration_seconds);
  const end = s.ended_at ? Date.parse(s.ended_at) : Date.now();
  const text = formatDuration((end - Date.parse(s.started_at)) / 1000);
  return s.ended_at ? text : `${text} so far`;
}

export function Sessions({ project }: TabProps) {
  const { session } = useSession();
  const { query, route } = useLocation();
  const state: State = query.state === 'ended' ? 'ended' : 'live';
  const endable = can(session, 'credentials:revoke');
  const [target, setTarget] = useState<RelaySession>();
  const [ended, setEnded] = useState<string>();

  const list = usePaged(
    async (cursor) => {
      const page = await must(
        api.GET('/admin/v1/projects/{project_id}/sessions', {
          params: { path: { project_id: project.id }, query: { state, cursor } },
        }),
      );
      return { items: page.sessions, next: page.next_cursor };
    },
    [state],
  );
  const end = useAction(async () => {
    if (!target) return;
    const r = await must(
      api.POST('/admin/v1/sessions/{session_id}/end', { params: { path: { session_id: target.id } } }),
    );
    setEnded(r.id);
    setTarget(undefined);
    list.reload();
  });
  const choose = (next: State) => {
    setEnded(undefined);
    route(`${paths.project(project.id, 'sessions')}${next === 'ended' ? '?state=ended' : ''}`);
  };

  return (
    <div>
      {ended && (
        <Done>
          Session <code>{ended}</code> ended: its relay closes it at its next revalidation (within about 15
          seconds) and its connection slot is free now.
        </Done>
      )}
      <h2>Relay sessions</h2>
      <p>Connections to relays made with this project's credentials, newest first.</p>
      <fieldset class="prj-segmented">
        <legend>Show</legend>
        {(['live', 'ended'] as const).map((s) => (
          <label key={s}>
            <input type="radio" name="state" value={s} checked={state === s} onChange={() => choose(s)} />
            {s === 'live' ? 'Live sessions' : 'Ended sessions'}
          </label>
        ))}
      </fieldset>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading sessions…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title={state === 'live' ? 'No live sessions' : 'No ended sessions'}>
          {state === 'live'
            ? 'A session starts when a client connects to a relay with a credential of this project.'
            : 'Sessions appear here once they end.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table
          caption={`${state === 'live' ? 'Live' : 'Ended'} relay sessions of ${project.name}`}
          head={[
            'Session',
            'Relay',
            'Role',
            state === 'ended' ? 'Started / ended' : 'Started',
            'Duration',
            'Sent / received',
            state === 'ended' ? 'Reason' : 'Actions',
          ]}
        >
          {list.items.map((s) => (
            <tr key={s.id}>
              <td>
                <code>{s.id}</code>
                <div class="muted">
                  <small>
                    credential <code class="prj-nowrap">{s.jti}</code>
                  </small>
                </div>
              </td>
              <td>
                <code>{s.relay_id}</code>
                <div class="muted">
                  <small>
                    {s.transport}
                    {s.remote && ` from ${s.remote}`}
                  </small>
                </div>
              </td>
              <td>{s.role ?? 'both'}</td>
              <td>
                <Time at={s.started_at} />
                {s.ended_at && (
                  <div>
                    <Time at={s.ended_at} />
                  </div>
                )}
              </td>
              <td class="prj-num">{duration(s)}</td>
              <td class="prj-num">
                {formatBytes(s.bytes.sent)} / {formatBytes(s.bytes.received)}
              </td>
              {state === 'ended' ? (
                <td>{s.reason ? <Badge>{s.reason}</Badge> : <span class="muted">—</span>}</td>
              ) : (
                <td>
                  {endable && !s.ended_at && (
                    <button
                      type="button"
                      class="danger small"
                      aria-label={`End session ${s.id}`}
                      onClick={() => {
                        end.setError(undefined);
                        setTarget(s);
                      }}
                    >
                      End
                    </button>
                  )}
                </td>
              )}
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      <Confirm
        open={target !== undefined}
        title="End this relay session?"
        confirmLabel="End session"
        danger
        busy={end.busy}
        error={end.error}
        onConfirm={() => void end.run()}
        onCancel={() => setTarget(undefined)}
      >
        {target && (
          <>
            <p>
              Session <code>{target.id}</code> on relay <code>{target.relay_id}</code> is refused at its next
              revalidation, so the relay closes it within one revalidation period (15 seconds by default). Its
              connection slot is freed at once.
            </p>
            <p>
              The credential it connected with (<code>{target.jti}</code>) is not revoked: a client holding it
              may connect again until it expires. To stop that, revoke the credential on the{' '}
              <a href={paths.project(project.id, 'credentials')}>Credentials</a> tab.
            </p>
          </>
        )}
      </Confirm>
    </div>
  );
}
