/**
 * One webhook endpoint (`/projects/:id/webhooks/:webhook`): its details and settings, its
 * delivery log (paged) with a redeliver button per delivery, and rotating its signing secret
 * (the new one shown once; the previous one keeps signing for a grace period).
 */
import { useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { api, type components, must } from '../../api.ts';
import { paths } from '../../routes.ts';
import { can, useSession } from '../../session.tsx';
import {
  Badge,
  Busy,
  Confirm,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  Page,
  SecretOnce,
  Select,
  Table,
  Time,
  useAction,
  useLoad,
  usePaged,
} from '../../ui/kit.tsx';
import { useProject } from '../project.tsx';
import { type Endpoint, EndpointStatus, EventPicker, type EventType } from './webhooks.tsx';
import '../../ui/project.css';

type Delivery = components['schemas']['WebhookDelivery'];

const GRACE = [
  { value: '300', label: '5 minutes (a leaked secret)' },
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '24 hours (the default)' },
  { value: '604800', label: '7 days (the most)' },
];

const TONE: Record<Delivery['status'], 'ok' | 'warn' | 'bad' | 'info'> = {
  pending: 'info',
  delivering: 'warn',
  succeeded: 'ok',
  failed: 'bad',
};

function Settings({ endpoint, onSaved }: { endpoint: Endpoint; onSaved: (e: Endpoint) => void }) {
  const [url, setUrl] = useState(endpoint.url);
  const [events, setEvents] = useState<EventType[]>(endpoint.events);
  const [description, setDescription] = useState(endpoint.description);
  const save = useAction(async () => {
    if (events.length === 0) throw new Error('Choose at least one event.');
    const e = await must(
      api.PATCH('/admin/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: { path: { project_id: endpoint.project_id, webhook_id: endpoint.id } },
        body: { url: url.trim(), events, description: description.trim() },
      }),
    );
    onSaved(e);
  });
  return (
    <form
      class="card"
      aria-labelledby="settings"
      onSubmit={(e) => {
        e.preventDefault();
        void save.run();
      }}
    >
      <h2 id="settings">Settings</h2>
      <Field
        label="URL"
        name="url"
        type="url"
        required
        maxLength={2048}
        value={url}
        onInput={(e) => setUrl(e.currentTarget.value)}
      />
      <EventPicker value={events} onChange={setEvents} />
      <Field
        label="Description"
        name="description"
        maxLength={500}
        value={description}
        onInput={(e) => setDescription(e.currentTarget.value)}
      />
      <ErrorNote error={save.error} />
      <button type="submit" disabled={save.busy}>
        {save.busy ? 'Working…' : 'Save settings'}
      </button>
    </form>
  );
}

export function Webhook() {
  const { params } = useRoute();
  const projectId = params.id ?? '';
  const webhookId = params.webhook ?? '';
  // A new endpoint's page starts afresh: nothing (a shown secret above all) carries over.
  return <EndpointPage key={`${projectId}/${webhookId}`} projectId={projectId} webhookId={webhookId} />;
}

function EndpointPage({ projectId, webhookId }: { projectId: string; webhookId: string }) {
  const { session } = useSession();
  const manage = can(session, 'webhooks:manage');
  const project = useProject(projectId);
  const [current, setCurrent] = useState<Endpoint>();
  const [secret, setSecret] = useState<string>();
  const [note, setNote] = useState<string>();
  const [rotating, setRotating] = useState(false);
  const [grace, setGrace] = useState('86400');
  const loaded = useLoad(async () => {
    const e = await must(
      api.GET('/admin/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: { path: { project_id: projectId, webhook_id: webhookId } },
      }),
    );
    setCurrent(e);
    return e;
  }, [projectId, webhookId]);
  const endpoint = current ?? loaded.data;

  const deliveries = usePaged(
    async (cursor) => {
      const page = await must(
        api.GET('/admin/v1/projects/{project_id}/webhooks/{webhook_id}/deliveries', {
          params: { path: { project_id: projectId, webhook_id: webhookId }, query: { cursor } },
        }),
      );
      return { items: page.deliveries, next: page.next_cursor };
    },
    [projectId, webhookId],
  );

  const rotate = useAction(async () => {
    const r = await must(
      api.POST('/admin/v1/projects/{project_id}/webhooks/{webhook_id}/rotate-secret', {
        params: { path: { project_id: projectId, webhook_id: webhookId } },
        body: { grace_seconds: Number(grace) },
      }),
    );
    setCurrent(r.webhook);
    setSecret(r.secret);
    setNote(undefined);
    setRotating(false);
  });
  const toggle = useAction(async (enabled: boolean) => {
    const e = await must(
      api.PATCH('/admin/v1/projects/{project_id}/webhooks/{webhook_id}', {
        params: { path: { project_id: projectId, webhook_id: webhookId } },
        body: { enabled },
      }),
    );
    setCurrent(e);
    setNote(enabled ? 'Endpoint enabled.' : 'Endpoint disabled: its unfinished deliveries ended as failed.');
    deliveries.reload();
  });
  const redeliver = useAction(async (d: Delivery) => {
    const r = await must(
      api.POST('/admin/v1/projects/{project_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver', {
        params: { path: { project_id: projectId, webhook_id: webhookId, delivery_id: d.id } },
      }),
    );
    setNote(`Redelivery of ${d.event_type} queued (message ${r.delivery.message_id}, the same webhook-id).`);
    deliveries.reload();
  });

  return (
    <Page title="Webhook endpoint">
      <div>
        <p class="prj-crumbs">
          <a href={paths.projects}>All projects</a> ·{' '}
          <a href={paths.project(projectId, 'webhooks')}>
            {project.data ? `${project.data.name}: webhooks` : 'Project webhooks'}
          </a>
        </p>
        {secret && (
          <SecretOnce
            label="New webhook signing secret"
            value={secret}
            onDismiss={() => setSecret(undefined)}
          />
        )}
        {note && <Done>{note}</Done>}
        <ErrorNote error={loaded.error} />
        <ErrorNote error={toggle.error} />
        {loaded.loading && !endpoint && <Busy label="Loading the endpoint…" />}
        {endpoint && (
          <section class="card" aria-labelledby="details">
            <h2 id="details">Details</h2>
            <dl class="facts">
              <dt>URL</dt>
              <dd class="mono">{endpoint.url}</dd>
              <dt>Status</dt>
              <dd>
                <EndpointStatus endpoint={endpoint} />
              </dd>
              <dt>Events</dt>
              <dd>{endpoint.events.join(', ')}</dd>
              <dt>Description</dt>
              <dd>{endpoint.description || <span class="muted">—</span>}</dd>
              <dt>Id</dt>
              <dd>
                <code>{endpoint.id}</code>
              </dd>
              <dt>Created</dt>
              <dd>
                <Time at={endpoint.created_at} />
              </dd>
              <dt>Updated</dt>
              <dd>
                <Time at={endpoint.updated_at} />
              </dd>
              {endpoint.previous_secret_expires_at && (
                <>
                  <dt>Previous secret signs until</dt>
                  <dd>
                    <Time at={endpoint.previous_secret_expires_at} />
                  </dd>
                </>
              )}
            </dl>
            {manage && (
              <div class="actions prj-after">
                <button
                  type="button"
                  class="secondary"
                  disabled={toggle.busy}
                  onClick={() => void toggle.run(!endpoint.enabled)}
                >
                  {toggle.busy ? 'Working…' : endpoint.enabled ? 'Disable endpoint' : 'Enable endpoint'}
                </button>
                <button
                  type="button"
                  onClick={() => {
                    rotate.setError(undefined);
                    setRotating(true);
                  }}
                >
                  Rotate signing secret
                </button>
              </div>
            )}
          </section>
        )}

        <h2>Deliveries</h2>
        <p>
          Newest first. A failed attempt is retried on a schedule (for about 27 hours); a delivery that failed
          for good can be sent again: the redelivery keeps the same <code>webhook-id</code>, so receivers can
          deduplicate.
        </p>
        <div class="actions">
          <button
            type="button"
            class="secondary small"
            disabled={deliveries.loading}
            onClick={deliveries.reload}
          >
            Refresh
          </button>
        </div>
        <ErrorNote error={deliveries.error} />
        <ErrorNote error={redeliver.error} />
        {!deliveries.loading && !deliveries.error && deliveries.items.length === 0 && (
          <Empty title="No deliveries yet">
            Deliveries appear when one of the endpoint's events happens in the project.
          </Empty>
        )}
        {deliveries.items.length > 0 && (
          <Table
            caption="Deliveries of this endpoint"
            head={[
              'Event',
              'Status',
              'Attempts',
              'Response',
              'Created',
              'Last attempt',
              'Next attempt',
              'Actions',
            ]}
          >
            {deliveries.items.map((d) => (
              <tr key={d.id}>
                <td>
                  {d.event_type}
                  <br />
                  <small class="muted mono">{d.message_id}</small>
                </td>
                <td>
                  <Badge tone={TONE[d.status]}>{d.status}</Badge>
                  {d.completed_at && (
                    <div class="muted">
                      <Time at={d.completed_at} />
                    </div>
                  )}
                </td>
                <td class="prj-num">{d.attempts}</td>
                <td>
                  {d.attempts === 0 ? (
                    <span class="muted">not tried yet</span>
                  ) : (
                    (d.response_status ?? <span class="muted">no answer</span>)
                  )}
                  {d.latency_ms !== null && <span class="muted"> · {d.latency_ms} ms</span>}
                  {d.error && <div class="error">{d.error}</div>}
                  {d.response_body && <code class="prj-clip">{d.response_body}</code>}
                </td>
                <td>
                  <Time at={d.created_at} />
                </td>
                <td>
                  <Time at={d.last_attempt_at} />
                </td>
                <td>
                  <Time at={d.next_attempt_at} />
                </td>
                <td>
                  {manage && (
                    <button
                      type="button"
                      class="secondary small"
                      aria-label={`Redeliver ${d.event_type} ${d.message_id}`}
                      disabled={redeliver.busy}
                      onClick={() => void redeliver.run(d)}
                    >
                      Redeliver
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
        <More list={deliveries} />

        {endpoint && manage && (
          <Settings
            key={endpoint.updated_at}
            endpoint={endpoint}
            onSaved={(e) => {
              setCurrent(e);
              setNote('Settings saved.');
            }}
          />
        )}

        <Confirm
          open={rotating}
          title="Rotate the signing secret?"
          confirmLabel="Rotate secret"
          busy={rotate.busy}
          error={rotate.error}
          onConfirm={() => void rotate.run()}
          onCancel={() => setRotating(false)}
        >
          <p>
            A new signing secret is made and shown once. During the grace period below every delivery carries
            two signatures, by the new and by the current secret, so deliveries keep verifying while you
            deploy the new secret to the receiver. After it only the new secret signs.
          </p>
          <p>If a rotation is already in its grace period, the oldest secret stops signing at once.</p>
          <Select
            label="Grace period"
            value={grace}
            options={GRACE}
            onChange={(e) => setGrace(e.currentTarget.value)}
          />
        </Confirm>
      </div>
    </Page>
  );
}
