/**
 * A project's API keys: the list (prefix and last four only), creating one (name, live/test,
 * scopes, an optional path ceiling; the key shown once) and revoking one, which revokes every
 * unexpired credential issued with it: the confirmation counts them first and the answer's
 * `revoked_credentials` says how many the call revoked.
 */
import { useRef, useState } from 'preact/hooks';
import { type paths as ApiPaths, api, type components, must } from '../../api.ts';
import { paths } from '../../routes.ts';
import { can, useSession } from '../../session.tsx';
import {
  Badge,
  Check,
  Confirm,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  SecretOnce,
  Select,
  Table,
  Time,
  useAction,
  usePaged,
} from '../../ui/kit.tsx';
import type { TabProps } from './tab.ts';

type ApiKey = components['schemas']['ApiKey'];
type CreateBody = NonNullable<
  ApiPaths['/admin/v1/projects/{project_id}/api-keys']['post']['requestBody']
>['content']['application/json'];
type Mode = NonNullable<CreateBody['mode']>;

/** The scopes createApiKey accepts (its description: the default is all three). */
const SCOPES = [
  {
    scope: 'relay:session',
    label: 'relay:session',
    hint: 'connect to relays (alone: publish and subscribe)',
  },
  { scope: 'relay:publish', label: 'relay:publish', hint: 'publish broadcasts' },
  { scope: 'relay:subscribe', label: 'relay:subscribe', hint: 'subscribe to broadcasts' },
] as const;

/** Patterns typed as a list: commas, spaces or new lines between them. */
function patterns(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

function CreateKey({
  projectId,
  onCreated,
}: {
  projectId: string;
  onCreated: (key: string, k: ApiKey) => void;
}) {
  const [name, setName] = useState('');
  const [mode, setMode] = useState<Mode>('live');
  const [scopes, setScopes] = useState<string[]>(SCOPES.map((s) => s.scope));
  const [bounded, setBounded] = useState(false);
  const [root, setRoot] = useState('');
  const [publish, setPublish] = useState('');
  const [subscribe, setSubscribe] = useState('');
  const create = useAction(async () => {
    if (scopes.length === 0) throw new Error('Choose at least one scope.');
    const body: CreateBody = { mode, scopes };
    if (name.trim()) body.name = name.trim();
    if (bounded)
      body.ceiling = { root: root.trim(), publish: patterns(publish), subscribe: patterns(subscribe) };
    const created = await must(
      api.POST('/admin/v1/projects/{project_id}/api-keys', {
        params: { path: { project_id: projectId } },
        body,
      }),
    );
    setName('');
    onCreated(created.key, created.api_key);
  });
  const toggle = (scope: string, on: boolean) =>
    setScopes((old) => (on ? [...old.filter((s) => s !== scope), scope] : old.filter((s) => s !== scope)));

  return (
    <form
      class="card"
      aria-labelledby="create-key"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2 id="create-key">Create an API key</h2>
      <div class="prj-form-grid">
        <Field
          label="Name"
          name="name"
          maxLength={64}
          autoComplete="off"
          hint="Optional: what uses this key."
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <Select
          label="Mode"
          name="mode"
          value={mode}
          options={[
            { value: 'live', label: 'Live (svc_live_…)' },
            { value: 'test', label: 'Test (svc_test_…)' },
          ]}
          onChange={(e) => setMode(e.currentTarget.value as Mode)}
        />
      </div>
      <fieldset class="prj-group">
        <legend>Scopes</legend>
        <small class="hint">The scopes credentials issued with this key may hold.</small>
        {SCOPES.map((s) => (
          <Check
            key={s.scope}
            label={`${s.label} — ${s.hint}`}
            checked={scopes.includes(s.scope)}
            onChange={(on) => toggle(s.scope, on)}
          />
        ))}
      </fieldset>
      <fieldset class="prj-group">
        <legend>Ceiling</legend>
        <Check label="Bound every credential of this key to paths" checked={bounded} onChange={setBounded} />
        <small class="hint">
          Optional and fixed for the key's life: a credential request within it is issued as asked, one
          without paths gets the ceiling, one beyond it is refused (403).
        </small>
        {bounded && (
          <div class="prj-form-grid">
            <Field
              label="Root"
              name="root"
              maxLength={512}
              autoComplete="off"
              placeholder="room/42"
              hint="A path in the project; empty: the whole project."
              value={root}
              onInput={(e) => setRoot(e.currentTarget.value)}
            />
            <Field
              label="Publish patterns"
              name="publish"
              autoComplete="off"
              placeholder="alice/**"
              hint="moq patterns relative to the root, separated by commas or spaces (`**` everything, `*` one segment). Empty: no publishing."
              value={publish}
              onInput={(e) => setPublish(e.currentTarget.value)}
            />
            <Field
              label="Subscribe patterns"
              name="subscribe"
              autoComplete="off"
              placeholder="**"
              hint="As for publishing. Empty: no subscribing."
              value={subscribe}
              onInput={(e) => setSubscribe(e.currentTarget.value)}
            />
          </div>
        )}
      </fieldset>
      <ErrorNote error={create.error} />
      <button type="submit" disabled={create.busy}>
        {create.busy ? 'Working…' : 'Create API key'}
      </button>
    </form>
  );
}

function ceilingText(k: ApiKey): string {
  if (!k.ceiling) return 'none';
  const c = k.ceiling;
  const root = c.root === '' ? '(whole project)' : c.root;
  return `root ${root}; publish ${c.publish.join(' ') || '—'}; subscribe ${c.subscribe.join(' ') || '—'}`;
}

function keyLabel(k: ApiKey): string {
  return `${k.name || 'unnamed key'} (${k.display_prefix}…${k.last_four})`;
}

/** How many unexpired, unrevoked credentials the key holds now (pages of 200, at most 5). */
async function activeCredentials(
  projectId: string,
  keyId: string,
): Promise<{ count: number; more: boolean }> {
  let count = 0;
  let cursor: string | undefined;
  for (let page = 0; page < 5; page++) {
    const r = await must(
      api.GET('/admin/v1/projects/{project_id}/credentials', {
        params: {
          path: { project_id: projectId },
          query: { api_key_id: keyId, active: 'true', limit: '200', cursor },
        },
      }),
    );
    count += r.credentials.length;
    if (r.next_cursor === null) return { count, more: false };
    cursor = r.next_cursor;
  }
  return { count, more: true };
}

export function ApiKeys({ project }: TabProps) {
  const { session } = useSession();
  const writable = can(session, 'api_keys:write');
  const [secret, setSecret] = useState<{ key: string; label: string }>();
  const [target, setTarget] = useState<ApiKey>();
  const [cascade, setCascade] = useState<{ count: number; more: boolean } | 'unknown'>();
  const [revoked, setRevoked] = useState<{ label: string; credentials: number }>();
  const list = usePaged(async (cursor) => {
    const page = await must(
      api.GET('/admin/v1/projects/{project_id}/api-keys', {
        params: { path: { project_id: project.id }, query: { cursor } },
      }),
    );
    return { items: page.api_keys, next: page.next_cursor };
  });
  const revoke = useAction(async () => {
    if (!target) return;
    const r = await must(
      api.DELETE('/admin/v1/projects/{project_id}/api-keys/{key_id}', {
        params: { path: { project_id: project.id, key_id: target.id } },
      }),
    );
    setRevoked({ label: keyLabel(target), credentials: r.revoked_credentials });
    setTarget(undefined);
    list.reload();
  });
  const asked = useRef<string>(undefined);
  const ask = (k: ApiKey) => {
    asked.current = k.id;
    setTarget(k);
    setCascade(undefined);
    revoke.setError(undefined);
    // Only the answer for the key asked about last is shown.
    activeCredentials(project.id, k.id).then(
      (c) => asked.current === k.id && setCascade(c),
      () => asked.current === k.id && setCascade('unknown'),
    );
  };

  return (
    <div>
      {secret && (
        <SecretOnce
          label={`API key ${secret.label}`}
          value={secret.key}
          onDismiss={() => setSecret(undefined)}
        />
      )}
      {revoked && (
        <Done>
          Revoked API key {revoked.label} and {revoked.credentials}{' '}
          {revoked.credentials === 1 ? 'credential' : 'credentials'} issued with it.
        </Done>
      )}
      <h2>API keys</h2>
      <p>
        An API key issues relay credentials (<code>POST /api/v1/credentials</code> with{' '}
        <code>X-API-Key: &lt;key&gt;</code>). Only its prefix and last four characters are shown here.
      </p>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading API keys…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No API keys yet">
          {writable
            ? 'Create one below: your service uses it to issue relay credentials.'
            : 'Someone with permission api_keys:write can create one.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table
          caption={`API keys of ${project.name}`}
          head={['Name', 'Key', 'Mode', 'Scopes', 'Ceiling', 'Created', 'Last used', 'Status', 'Actions']}
        >
          {list.items.map((k) => (
            <tr key={k.id}>
              <td>{k.name || <span class="muted">unnamed</span>}</td>
              <td>
                <code class="prj-nowrap">
                  {k.display_prefix}…{k.last_four}
                </code>
              </td>
              <td>
                <Badge tone={k.mode === 'live' ? 'ok' : 'info'}>{k.mode}</Badge>
              </td>
              <td>{k.scopes.join(', ')}</td>
              <td>{ceilingText(k)}</td>
              <td>
                <Time at={k.created_at} />
              </td>
              <td>
                <Time at={k.last_used_at} />
              </td>
              <td>
                {k.revoked_at ? (
                  <>
                    <Badge tone="bad">revoked</Badge> <Time at={k.revoked_at} />
                  </>
                ) : (
                  <Badge tone="ok">active</Badge>
                )}
              </td>
              <td>
                <div class="prj-row-actions">
                  <a
                    href={`${paths.project(project.id, 'credentials')}?api_key_id=${encodeURIComponent(k.id)}`}
                    aria-label={`Credentials of ${keyLabel(k)}`}
                  >
                    Credentials
                  </a>
                  {writable && !k.revoked_at && (
                    <button
                      type="button"
                      class="danger small"
                      aria-label={`Revoke ${keyLabel(k)}`}
                      onClick={() => ask(k)}
                    >
                      Revoke
                    </button>
                  )}
                </div>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      {writable && (
        <CreateKey
          projectId={project.id}
          onCreated={(key, k) => {
            setRevoked(undefined);
            setSecret({ key, label: keyLabel(k) });
            list.reload();
          }}
        />
      )}
      <Confirm
        open={target !== undefined}
        title="Revoke this API key?"
        confirmLabel="Revoke key and its credentials"
        danger
        busy={revoke.busy}
        error={revoke.error}
        onConfirm={() => void revoke.run()}
        onCancel={() => setTarget(undefined)}
      >
        {target && (
          <>
            <p>
              <strong>{keyLabel(target)}</strong> stops working at once on this gateway and on every other
              within a second. Every unexpired credential issued with it is revoked in the same call: relays
              refuse it, introspection reports it inactive and its connection slot is freed. This cannot be
              undone.
            </p>
            <p role="status">
              {cascade === undefined
                ? 'Counting its active credentials…'
                : cascade === 'unknown'
                  ? 'Its active credentials could not be counted; all of them will be revoked.'
                  : `It holds ${cascade.count}${cascade.more ? ' or more' : ''} active ${
                      cascade.count === 1 && !cascade.more ? 'credential' : 'credentials'
                    } now.`}
            </p>
          </>
        )}
      </Confirm>
    </div>
  );
}
