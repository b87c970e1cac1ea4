/**
 * A project's webhook endpoints: the list with the platform's notices, adding one (its signing
 * secret shown once), enabling or disabling, removing; each links to its own page
 * (deliveries, redelivery, secret rotation).
 */
import { useState } from 'preact/hooks';
import { api, type components, must } from '../../api.ts';
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
  Table,
  Time,
  useAction,
  useId,
  usePaged,
} from '../../ui/kit.tsx';
import type { TabProps } from './tab.ts';

export type Endpoint = components['schemas']['WebhookEndpoint'];
export type EventType = Endpoint['events'][number];

/** Every event type the API accepts (the schema's enum), with what it reports. */
export const EVENTS: Record<EventType, string> = {
  'session.started': 'a relay session started',
  'session.ended': 'a relay session ended',
  'session.refused': 'relay connections were refused (counted per window)',
  'credential.revoked': 'a credential was revoked',
  'credentials.bulk_revoked': "the project's credentials were revoked in bulk",
  'api_key.created': 'an API key was created',
  'api_key.revoked': 'an API key was revoked',
  'cap.reached': 'the concurrent-connection cap was reached',
  'plan.changed': "the tenant's plan changed",
  'signing_key.rotated': 'a credential signing key was rotated',
  'signing_key.revoked': 'a credential signing key was revoked',
};

function EventCheck({
  event,
  checked,
  onChange,
}: {
  event: EventType;
  checked: boolean;
  onChange: (on: boolean) => void;
}) {
  const id = useId('evt');
  return (
    <div class="check">
      <input id={id} type="checkbox" checked={checked} onChange={(e) => onChange(e.currentTarget.checked)} />
      <label for={id}>
        {event} <span class="prj-desc">— {EVENTS[event]}</span>
      </label>
    </div>
  );
}

/** The event types as checkboxes in a fieldset. */
export function EventPicker({
  value,
  onChange,
}: {
  value: EventType[];
  onChange: (events: EventType[]) => void;
}) {
  const all = Object.keys(EVENTS) as EventType[];
  return (
    <fieldset class="prj-group">
      <legend>Events</legend>
      <small class="hint">The events this endpoint receives (at least one).</small>
      <div class="prj-choices prj-wide">
        {all.map((e) => (
          <EventCheck
            key={e}
            event={e}
            checked={value.includes(e)}
            onChange={(on) =>
              onChange(on ? [...value.filter((x) => x !== e), e] : value.filter((x) => x !== e))
            }
          />
        ))}
      </div>
      <p>
        <button type="button" class="link" onClick={() => onChange(all)}>
          Select all
        </button>{' '}
        ·{' '}
        <button type="button" class="link" onClick={() => onChange([])}>
          Clear
        </button>
      </p>
    </fieldset>
  );
}

/** An endpoint's state in words. */
export function EndpointStatus({ endpoint }: { endpoint: Endpoint }) {
  if (!endpoint.enabled && endpoint.disabled_at)
    return (
      <>
        <Badge tone="bad">disabled by the platform</Badge> <Time at={endpoint.disabled_at} />
        {endpoint.disabled_reason && <div class="muted">{endpoint.disabled_reason}</div>}
      </>
    );
  if (!endpoint.enabled) return <Badge>disabled</Badge>;
  if (endpoint.failing_since)
    return (
      <>
        <Badge tone="warn">failing</Badge> since <Time at={endpoint.failing_since} />
      </>
    );
  return <Badge tone="ok">enabled</Badge>;
}

function CreateEndpoint({
  projectId,
  onCreated,
}: {
  projectId: string;
  onCreated: (secret: string) => void;
}) {
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<EventType[]>([]);
  const [description, setDescription] = useState('');
  const [enabled, setEnabled] = useState(true);
  const create = useAction(async () => {
    if (events.length === 0) throw new Error('Choose at least one event.');
    const r = await must(
      api.POST('/admin/v1/projects/{project_id}/webhooks', {
        params: { path: { project_id: projectId } },
        body: {
          url: url.trim(),
          events,
          enabled,
          ...(description.trim() ? { description: description.trim() } : {}),
        },
      }),
    );
    setUrl('');
    setDescription('');
    setEvents([]);
    onCreated(r.secret);
  });
  return (
    <form
      class="card"
      aria-labelledby="create-webhook"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2 id="create-webhook">Add an endpoint</h2>
      <Field
        label="URL"
        name="url"
        type="url"
        required
        maxLength={2048}
        autoComplete="off"
        placeholder="https://hooks.example.com/relayplane"
        hint="https:// to a public address (private and loopback addresses are refused)."
        value={url}
        onInput={(e) => setUrl(e.currentTarget.value)}
      />
      <EventPicker value={events} onChange={setEvents} />
      <Field
        label="Description"
        name="description"
        maxLength={500}
        autoComplete="off"
        hint="Optional."
        value={description}
        onInput={(e) => setDescription(e.currentTarget.value)}
      />
      <Check label="Enabled: deliver events from now on" checked={enabled} onChange={setEnabled} />
      <ErrorNote error={create.error} />
      <button type="submit" disabled={create.busy}>
        {create.busy ? 'Working…' : 'Add endpoint'}
      </button>
    </form>
  );
}

export function Webhooks({ project }: TabProps) {
  const { session } = useSession();
  const manage = can(session, 'webhooks:manage');
  const [secret, setSecret] = useState<string>();
  const [notices, setNotices] = useState<components['schemas']['WebhookNotice'][]>([]);
  const [done, setDone] = useState<string>();
  const [toDelete, setToDelete] = useState<Endpoint>();
  const [toDisable, setToDisable] = useState<Endpoint>();
  const list = usePaged(async (cursor) => {
    const page = await must(
      api.GET('/admin/v1/projects/{project_id}/webhooks', {
        params: { path: { project_id: project.id }, query: { cursor } },
      }),
    );
    if (cursor === undefined) setNotices(page.notices);
    return { items: page.webhooks, next: page.next_cursor };
  });
  const setEnabled = useAction(async (endpoint: Endpoint, enabled: boolean) => {
    await must(
      api.PATCH('/admin/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: { path: { project_id: project.id, webhook_id: endpoint.id } },
        body: { enabled },
      }),
    );
    setDone(`${endpoint.url} ${enabled ? 'enabled' : 'disabled'}.`);
    setToDisable(undefined);
    list.reload();
  });
  const remove = useAction(async () => {
    if (!toDelete) return;
    await must(
      api.DELETE('/admin/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: { path: { project_id: project.id, webhook_id: toDelete.id } },
      }),
    );
    setDone(`${toDelete.url} removed, with its delivery log.`);
    setToDelete(undefined);
    list.reload();
  });

  return (
    <div>
      {secret && (
        <SecretOnce label="Webhook signing secret" value={secret} onDismiss={() => setSecret(undefined)} />
      )}
      {done && <Done>{done}</Done>}
      <h2>Webhooks</h2>
      <p>
        Endpoints receive the project's events as signed HTTPS requests (Standard Webhooks): verify each with
        the endpoint's signing secret.
      </p>
      {notices.map((n) => (
        <div key={`${n.endpoint_id}-${n.at}`} class="notice error">
          <strong>Endpoint disabled</strong> <Time at={n.at} />: {n.message}
        </div>
      ))}
      <ErrorNote error={list.error} />
      {!toDisable && <ErrorNote error={setEnabled.error} />}
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading endpoints…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No webhook endpoints">
          Add one below to be told of sessions, revocations and keys.
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table
          caption={`Webhook endpoints of ${project.name}`}
          head={['URL', 'Events', 'Description', 'Status', 'Created', 'Actions']}
        >
          {list.items.map((w) => (
            <tr key={w.id}>
              <td>
                <a href={paths.webhook(project.id, w.id)} class="mono">
                  {w.url}
                </a>
              </td>
              <td>{w.events.join(', ')}</td>
              <td>{w.description || <span class="muted">—</span>}</td>
              <td>
                <EndpointStatus endpoint={w} />
              </td>
              <td>
                <Time at={w.created_at} />
              </td>
              <td>
                <div class="prj-row-actions">
                  <a href={paths.webhook(project.id, w.id)} aria-label={`Deliveries of ${w.url}`}>
                    Deliveries
                  </a>
                  {manage && w.enabled && (
                    <button
                      type="button"
                      class="secondary small"
                      aria-label={`Disable ${w.url}`}
                      onClick={() => setToDisable(w)}
                    >
                      Disable
                    </button>
                  )}
                  {manage && !w.enabled && (
                    <button
                      type="button"
                      class="secondary small"
                      aria-label={`Enable ${w.url}`}
                      disabled={setEnabled.busy}
                      onClick={() => void setEnabled.run(w, true)}
                    >
                      Enable
                    </button>
                  )}
                  {manage && (
                    <button
                      type="button"
                      class="danger small"
                      aria-label={`Remove ${w.url}`}
                      onClick={() => {
                        remove.setError(undefined);
                        setToDelete(w);
                      }}
                    >
                      Remove
                    </button>
                  )}
                </div>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      {manage && (
        <CreateEndpoint
          projectId={project.id}
          onCreated={(s) => {
            setDone(undefined);
            setSecret(s);
            list.reload();
          }}
        />
      )}
      <Confirm
        open={toDisable !== undefined}
        title="Disable this endpoint?"
        confirmLabel="Disable endpoint"
        busy={setEnabled.busy}
        error={setEnabled.error}
        onConfirm={() => toDisable && void setEnabled.run(toDisable, false)}
        onCancel={() => setToDisable(undefined)}
      >
        <p>
          <code>{toDisable?.url}</code> receives no events while disabled (events meanwhile are not queued for
          it), and its unfinished deliveries end as failed; you can redeliver them from its page after
          enabling it again.
        </p>
      </Confirm>
      <Confirm
        open={toDelete !== undefined}
        title="Remove this endpoint?"
        confirmLabel="Remove endpoint"
        danger
        busy={remove.busy}
        error={remove.error}
        onConfirm={() => void remove.run()}
        onCancel={() => setToDelete(undefined)}
      >
        <p>
          <code>{toDelete?.url}</code> is removed with its pending deliveries and its delivery log; it
          receives no more events. This cannot be undone.
        </p>
      </Confirm>
    </div>
  );
}
