/**
 * A project's relay credentials (ids and times, never a token), active ones by default,
 * optionally of one API key (`?api_key_id=`); revoking one (POST /admin/v1/credentials/{jti}/revoke)
 * and revoking in bulk everything issued before now, which also raises the project's watermark.
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
  Select,
  Table,
  Time,
  useAction,
  useLoad,
  usePaged,
} from '../../ui/kit.tsx';
import type { TabProps } from './tab.ts';

interface Credential {
  jti: string;
  api_key_id: string;
  issued_at: string;
  expires_at: string;
  revoked_at: string | null;
}

function status(c: Credential) {
  if (c.revoked_at) return <Badge tone="bad">revoked</Badge>;
  if (new Date(c.expires_at).getTime() <= Date.now()) return <Badge tone="info">expired</Badge>;
  return <Badge tone="ok">active</Badge>;
}

export function Credentials({ project }: TabProps) {
  const { session } = useSession();
  const { query, route } = useLocation();
  const apiKeyId = query.api_key_id ?? '';
  const show = query.show === 'all' ? 'all' : 'active';
  const revocable = can(session, 'credentials:revoke');
  const [target, setTarget] = useState<Credential>();
  const [revokedOne, setRevokedOne] = useState<{ jti: string; at: string }>();
  const [bulkOpen, setBulkOpen] = useState(false);
  const [bulk, setBulk] = useState<{ revoked: number; watermark: string }>();

  const keys = useLoad(async () => {
    const page = await must(
      api.GET('/admin/v1/projects/{project_id}/api-keys', {
        params: { path: { project_id: project.id }, query: { limit: '200' } },
      }),
    );
    return page.api_keys;
  }, [project.id]);
  const keyName = (id: string) => {
    const k = keys.data?.find((x) => x.id === id);
    return k ? `${k.name || 'unnamed'} (${k.display_prefix}…${k.last_four})` : id;
  };

  const list = usePaged(
    async (cursor) => {
      const page = await must(
        api.GET('/admin/v1/projects/{project_id}/credentials', {
          params: {
            path: { project_id: project.id },
            query: {
              cursor,
              ...(show === 'active' ? { active: 'true' as const } : {}),
              ...(apiKeyId ? { api_key_id: apiKeyId } : {}),
            },
          },
        }),
      );
      return { items: page.credentials, next: page.next_cursor };
    },
    [apiKeyId, show],
  );

  const filter = (next: { api_key_id?: string; show?: string }) => {
    const q = new URLSearchParams();
    const key = next.api_key_id ?? apiKeyId;
    const s = next.show ?? show;
    if (key) q.set('api_key_id', key);
    if (s === 'all') q.set('show', 'all');
    const qs = q.toString();
    route(`${paths.project(project.id, 'credentials')}${qs ? `?${qs}` : ''}`);
  };

  const revokeOne = useAction(async () => {
    if (!target) return;
    const r = await must(
      api.POST('/admin/v1/credentials/{jti}/revoke', { params: { path: { jti: target.jti } } }),
    );
    setRevokedOne({ jti: r.jti, at: r.revoked_at });
    setTarget(undefined);
    list.reload();
  });

  const [cutoff, setCutoff] = useState<string>('');
  const revokeAll = useAction(async () => {
    // "Now", as the request leaves: the API refuses a time in the future and rounds up to a second.
    const issuedBefore = new Date().toISOString();
    const r = await must(
      api.POST('/admin/v1/projects/{project_id}/credentials/revoke', {
        params: { path: { project_id: project.id } },
        body: { issued_before: issuedBefore },
      }),
    );
    // The API rounds `issued_before` up to a whole second (as `iat` is): that is the watermark.
    const watermark = new Date(Math.ceil(Date.parse(issuedBefore) / 1000) * 1000).toISOString();
    setBulk({ revoked: r.revoked, watermark });
    setBulkOpen(false);
    list.reload();
  });

  const keyOptions = [
    { value: '', label: 'Every API key' },
    ...(keys.data ?? []).map((k) => ({ value: k.id, label: keyName(k.id) })),
  ];
  if (apiKeyId && !keys.data?.some((k) => k.id === apiKeyId))
    keyOptions.push({ value: apiKeyId, label: apiKeyId });

  return (
    <div>
      {revokedOne && (
        <Done>
          Credential <code>{revokedOne.jti}</code> revoked at <Time at={revokedOne.at} />. Its connection slot
          is free and relays learn of it through the revocation feed.
        </Done>
      )}
      {bulk && (
        <Done>
          Revoked {bulk.revoked} {bulk.revoked === 1 ? 'credential' : 'credentials'}. The project's watermark
          is now <Time at={bulk.watermark} />: any credential of {project.name} issued before it is refused.
        </Done>
      )}
      <h2>Relay credentials</h2>
      <p>
        The short-lived tokens the project's API keys issued: their ids (<code>jti</code>) and times, never
        the token.
      </p>
      <div class="prj-form-grid">
        <Select
          label="API key"
          value={apiKeyId}
          options={keyOptions}
          onChange={(e) => filter({ api_key_id: e.currentTarget.value })}
        />
        <Select
          label="Show"
          value={show}
          options={[
            { value: 'active', label: 'Active (unexpired, unrevoked)' },
            { value: 'all', label: 'All, with expired and revoked' },
          ]}
          onChange={(e) => filter({ show: e.currentTarget.value })}
        />
      </div>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading credentials…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title={show === 'active' ? 'No active credentials' : 'No credentials'}>
          Your service issues them with an API key: <code>POST /api/v1/credentials</code> with{' '}
          <code>X-API-Key: &lt;key&gt;</code>. Create a key on the{' '}
          <a href={paths.project(project.id, 'api-keys')}>API keys</a> tab.
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table
          caption={`Relay credentials of ${project.name}`}
          head={['Credential id', 'API key', 'Issued', 'Expires', 'Status', 'Actions']}
        >
          {list.items.map((c) => (
            <tr key={c.jti}>
              <td>
                <code class="prj-nowrap">{c.jti}</code>
              </td>
              <td>{keyName(c.api_key_id)}</td>
              <td>
                <Time at={c.issued_at} />
              </td>
              <td>
                <Time at={c.expires_at} />
              </td>
              <td>
                {status(c)} {c.revoked_at && <Time at={c.revoked_at} />}
              </td>
              <td>
                {revocable && !c.revoked_at && new Date(c.expires_at).getTime() > Date.now() && (
                  <button
                    type="button"
                    class="danger small"
                    aria-label={`Revoke credential ${c.jti}`}
                    onClick={() => {
                      revokeOne.setError(undefined);
                      setTarget(c);
                    }}
                  >
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />

      {revocable && (
        <section class="card" aria-labelledby="bulk-revoke">
          <h2 id="bulk-revoke">Revoke every credential</h2>
          <p>
            For a leak: revokes every credential of this project issued before now, whichever key issued it,
            and sets the project's watermark to now. The API keys stay active and go on issuing new
            credentials; to stop a key, revoke it on the{' '}
            <a href={paths.project(project.id, 'api-keys')}>API keys</a> tab.
          </p>
          <button
            type="button"
            class="danger"
            onClick={() => {
              revokeAll.setError(undefined);
              setCutoff(new Date().toISOString());
              setBulkOpen(true);
            }}
          >
            Revoke all credentials issued before now
          </button>
        </section>
      )}

      <Confirm
        open={target !== undefined}
        title="Revoke this credential?"
        confirmLabel="Revoke credential"
        danger
        busy={revokeOne.busy}
        error={revokeOne.error}
        onConfirm={() => void revokeOne.run()}
        onCancel={() => setTarget(undefined)}
      >
        {target && (
          <p>
            Credential <code>{target.jti}</code> (issued <Time at={target.issued_at} />) is refused from now
            on: relays drop it through the revocation feed, introspection reports it inactive and its
            connection slot is freed. The API key that issued it stays active. This cannot be undone.
          </p>
        )}
      </Confirm>
      <Confirm
        open={bulkOpen}
        title={`Revoke every credential of ${project.name}?`}
        confirmLabel="Revoke all credentials"
        danger
        busy={revokeAll.busy}
        error={revokeAll.error}
        onConfirm={() => void revokeAll.run()}
        onCancel={() => setBulkOpen(false)}
      >
        <p>
          Every unexpired, unrevoked credential of project <strong>{project.name}</strong> issued before now
          (about <Time at={cutoff} />) is revoked, from every API key, and their connection slots are freed.
        </p>
        <p>
          Now becomes the project's <strong>watermark</strong>: relays, introspection and verifiers refuse any
          credential of the project issued before it, even one missing from the revocation feed. Credentials
          issued after it keep working, and the API keys stay active. This cannot be undone.
        </p>
      </Confirm>
    </div>
  );
}
