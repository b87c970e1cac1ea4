/**
 * A project's IP allowlist: the networks its API keys are accepted from (empty: any address);
 * adding a CIDR (normalised by the API) and removing one.
 */
import { useState } from 'preact/hooks';
import { api, type components, must } from '../../api.ts';
import { can, useSession } from '../../session.tsx';
import {
  Confirm,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  Table,
  Time,
  useAction,
  usePaged,
} from '../../ui/kit.tsx';
import type { TabProps } from './tab.ts';

type Entry = components['schemas']['AllowlistEntry'];

export function Allowlist({ project }: TabProps) {
  const { session } = useSession();
  const writable = can(session, 'allowlist:write');
  const [cidr, setCidr] = useState('');
  const [added, setAdded] = useState<Entry>();
  const [removed, setRemoved] = useState<string>();
  const [target, setTarget] = useState<Entry>();
  const list = usePaged(async (cursor) => {
    const page = await must(
      api.GET('/admin/v1/projects/{project_id}/allowlist', {
        params: { path: { project_id: project.id }, query: { cursor } },
      }),
    );
    return { items: page.entries, next: page.next_cursor };
  });
  const add = useAction(async () => {
    const entry = await must(
      api.POST('/admin/v1/projects/{project_id}/allowlist', {
        params: { path: { project_id: project.id } },
        body: { cidr: cidr.trim() },
      }),
    );
    setCidr('');
    setRemoved(undefined);
    setAdded(entry);
    list.reload();
  });
  const remove = useAction(async () => {
    if (!target) return;
    await must(
      api.DELETE('/admin/v1/projects/{project_id}/allowlist/{entry_id}', {
        params: { path: { project_id: project.id, entry_id: target.id } },
      }),
    );
    setAdded(undefined);
    setRemoved(target.cidr);
    setTarget(undefined);
    list.reload();
  });
  const last = list.items.length === 1 && list.next === null;

  return (
    <div>
      {added && <Done>Added {added.cidr}. It applies on every gateway within a second.</Done>}
      {removed && <Done>Removed {removed}. It applies on every gateway within a second.</Done>}
      <h2>IP allowlist</h2>
      <p>
        While the allowlist is <strong>empty</strong>, the project's API keys work from{' '}
        <strong>any address</strong>. Once it has an entry, they work only from the networks listed: a request
        from elsewhere is refused (403, “your IP address is not in this project's allowlist”). Changes apply
        on every gateway within a second.
      </p>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading the allowlist…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No entries: API keys work from any address">
          {writable
            ? 'Add the networks your servers call from to accept API keys only from them.'
            : 'Someone with permission allowlist:write can add networks.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table caption={`IP allowlist of ${project.name}`} head={['Network', 'Added', 'Actions']}>
          {list.items.map((e) => (
            <tr key={e.id}>
              <td>
                <code>{e.cidr}</code>
              </td>
              <td>
                <Time at={e.created_at} />
              </td>
              <td>
                {writable && (
                  <button
                    type="button"
                    class="danger small"
                    aria-label={`Remove ${e.cidr}`}
                    onClick={() => {
                      remove.setError(undefined);
                      setTarget(e);
                    }}
                  >
                    Remove
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      {writable && (
        <form
          class="card"
          aria-labelledby="add-cidr"
          onSubmit={(e) => {
            e.preventDefault();
            void add.run();
          }}
        >
          <h2 id="add-cidr">Add a network</h2>
          <Field
            label="IPv4 or IPv6 network (CIDR)"
            name="cidr"
            required
            maxLength={64}
            autoComplete="off"
            spellcheck={false}
            placeholder="203.0.113.0/24"
            hint="A bare address is one host; the API stores the network address (10.1.2.3/16 becomes 10.1.0.0/16)."
            value={cidr}
            onInput={(e) => setCidr(e.currentTarget.value)}
          />
          <ErrorNote error={add.error} />
          <button type="submit" disabled={add.busy}>
            {add.busy ? 'Working…' : 'Add network'}
          </button>
        </form>
      )}
      <Confirm
        open={target !== undefined}
        title="Remove this network?"
        confirmLabel="Remove network"
        danger
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => void remove.run()}
        onCancel={() => setTarget(undefined)}
      >
        {target && (
          <p>
            API keys of <strong>{project.name}</strong> are no longer accepted from <code>{target.cidr}</code>
            {last
              ? '. It is the last entry: once it is removed the allowlist is empty, and the project’s API keys work from any address.'
              : ' (unless another entry covers it).'}{' '}
            This applies on every gateway within a second.
          </p>
        )}
      </Confirm>
    </div>
  );
}
