/**
 * The audit log: the tenant's events (paged) with the API's filters kept in the URL query, so a
 * filtered view is a bookmark; each event's details expandable; verifying the chain; and the
 * signed checkpoints: listed, signed on demand, and downloaded as the JSON file
 * `relayplane audit checkpoints --json` saves (checkpoints plus the audit key), which
 * `relayplane audit verify --checkpoints <file>` checks later.
 */
import { useEffect, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { type paths as ApiPaths, api, must } from '../api.ts';
import { paths } from '../routes.ts';
import { can, useSession } from '../session.tsx';
import {
  Badge,
  Busy,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  Page,
  Table,
  Time,
  useAction,
  usePaged,
} from '../ui/kit.tsx';
import '../ui/overview.css';

type ListQuery = NonNullable<ApiPaths['/admin/v1/audit-events']['get']['parameters']['query']>;
type AuditEvent =
  ApiPaths['/admin/v1/audit-events']['get']['responses'][200]['content']['application/json']['events'][number];
type Checkpoint =
  ApiPaths['/admin/v1/audit-events/checkpoints']['get']['responses'][200]['content']['application/json']['checkpoints'][number];
type Verdict =
  ApiPaths['/admin/v1/audit-events/verify']['get']['responses'][200]['content']['application/json'];
type AuditKeys = ApiPaths['/v1/audit/keys']['get']['responses'][200]['content']['application/json'];

/** The filters the API offers, as they sit in the page's URL query. */
const FILTERS = ['action', 'actor_id', 'target_id', 'since', 'until', 'tenant_id'] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** Actions of docs/audit.md, offered as suggestions for the action filter (any text is accepted). */
const ACTIONS = [
  'tenant.create tenant.settings_change session.login session.login_failed session.logout',
  'session.revoke session.switch_tenant user.password_change user.mfa_enroll user.mfa_confirm',
  'user.mfa_disable user.mfa_failed member.add member.role_change member.remove project.create',
  'api_key.create api_key.revoke allowlist.create allowlist.delete webhook_endpoint.create',
  'webhook_endpoint.update webhook_endpoint.delete webhook_endpoint.rotate_secret',
  'webhook_endpoint.disable webhook_delivery.redeliver bot.create bot_key.create bot_key.revoke',
  'identity_token.create identity_token.revoke device.approve device.deny device.token_issue',
  'audit.prune credential.revoke credentials.bulk_revoke relay_session.end plan.change checkout.create',
  'checkout.confirm billing.webhook',
]
  .join(' ')
  .split(' ');

/** The filters typed as text (`since`/`until` are picked as local times). */
const TEXT_FILTERS: Array<{ name: keyof Filters; label: string; max: number; hint?: string }> = [
  { name: 'action', label: 'Action', max: 81, hint: 'Exact, e.g. member.add.' },
  { name: 'actor_id', label: 'Actor id', max: 128, hint: 'A user, bot or identity token id (exact).' },
  { name: 'target_id', label: 'Target id', max: 128, hint: 'Exact.' },
  {
    name: 'tenant_id',
    label: 'Tenant id (platform admins)',
    max: 64,
    hint: "Another tenant's trail, or platform for events tied to no tenant.",
  },
];

const OUTCOME_TONE = { success: 'ok', failure: 'bad', denied: 'warn' } as const;

function filtersOf(query: Record<string, string>): Filters {
  const out: Filters = {};
  for (const key of FILTERS) if (query[key]) out[key] = query[key];
  return out;
}

/** An RFC 3339 instant (the URL's form) as a `datetime-local` value in the browser's zone. */
function toLocalInput(iso: string | undefined): string {
  const t = Date.parse(iso ?? '');
  if (Number.isNaN(t)) return '';
  return new Date(t - new Date(t).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** A `datetime-local` value (browser zone) as RFC 3339 UTC. */
function fromLocalInput(value: string): string | undefined {
  if (!value) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

function FilterForm({ filters, platformAdmin }: { filters: Filters; platformAdmin: boolean }) {
  const { route } = useLocation();
  const [draft, setDraft] = useState<Filters>(filters);
  const key = JSON.stringify(filters);
  useEffect(() => setDraft(filters), [key]);
  const set = (name: keyof Filters, value: string | undefined) =>
    setDraft((d) => ({ ...d, [name]: value || undefined }));
  const apply = (next: Filters) => {
    const qs = new URLSearchParams();
    for (const name of FILTERS) {
      const v = next[name]?.trim();
      if (v) qs.set(name, v);
    }
    const s = qs.toString();
    route(s ? `${paths.audit}?${s}` : paths.audit);
  };
  return (
    <search aria-label="Filter audit events">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          apply(draft);
        }}
      >
        <div class="ov-filters">
          {TEXT_FILTERS.filter((f) => platformAdmin || f.name !== 'tenant_id').map((f) => (
            <Field
              key={f.name}
              label={f.label}
              hint={f.hint}
              list={f.name === 'action' ? 'audit-actions' : undefined}
              maxLength={f.max}
              value={draft[f.name] ?? ''}
              onInput={(e) => set(f.name, e.currentTarget.value)}
            />
          ))}
          <Field
            label="From (inclusive)"
            type="datetime-local"
            value={toLocalInput(draft.since)}
            onInput={(e) => set('since', fromLocalInput(e.currentTarget.value))}
          />
          <Field
            label="Until (exclusive)"
            type="datetime-local"
            value={toLocalInput(draft.until)}
            onInput={(e) => set('until', fromLocalInput(e.currentTarget.value))}
          />
          <div class="actions">
            <button type="submit">Apply filters</button>
            <button
              type="button"
              class="secondary"
              onClick={() => apply({})}
              disabled={Object.keys(filters).length === 0}
            >
              Clear filters
            </button>
          </div>
        </div>
        <datalist id="audit-actions">
          {ACTIONS.map((a) => (
            <option key={a} value={a} />
          ))}
        </datalist>
      </form>
    </search>
  );
}

/** An event's row, and under it (when opened) a full-width row with everything it records. */
function EventRows({ event }: { event: AuditEvent }) {
  const [open, setOpen] = useState(false);
  const id = `event-${event.id}`;
  return (
    <>
      <tr>
        <td>
          <Time at={event.occurred_at} />
        </td>
        <td>
          <code class="ov-action">{event.action}</code>{' '}
          <Badge tone={OUTCOME_TONE[event.outcome]}>{event.outcome}</Badge>
          <br />
          <button
            type="button"
            class="link small"
            aria-expanded={open}
            aria-controls={open ? id : undefined}
            aria-label={`Details of ${event.action}, position ${event.seq}`}
            onClick={() => setOpen(!open)}
          >
            {open ? 'Hide details' : 'Details'}
          </button>
        </td>
        <td>
          {event.actor.type}
          {event.actor.id && <span class="mono ov-id">{event.actor.id}</span>}
        </td>
      </tr>
      {open && (
        <tr id={id}>
          <td colSpan={3}>
            <dl class="facts">
              <dt>Event id</dt>
              <dd class="mono">{event.id}</dd>
              <dt>Target</dt>
              <dd>
                {event.target.type} <span class="mono">{event.target.id || '—'}</span>
              </dd>
              <dt>IP address</dt>
              <dd class="mono">{event.ip ?? '—'}</dd>
              <dt>User agent</dt>
              <dd>{event.user_agent ?? '—'}</dd>
              <dt>Request id</dt>
              <dd class="mono">{event.request_id ?? '—'}</dd>
              <dt>Position</dt>
              <dd>{event.seq}</dd>
              <dt>Hash</dt>
              <dd class="mono">{event.hash}</dd>
              <dt>Previous hash</dt>
              <dd class="mono">{event.prev_hash}</dd>
            </dl>
            <div class="ov-details">
              Details recorded:
              <pre class="mono">{JSON.stringify(event.details, null, 2)}</pre>
            </div>
          </td>
        </tr>
      )}
    </>
  );
}

function Events({ filters }: { filters: Filters }) {
  const list = usePaged(
    async (cursor) => {
      const query: ListQuery = { ...filters, limit: '50', ...(cursor ? { cursor } : {}) };
      const body = await must(api.GET('/admin/v1/audit-events', { params: { query } }));
      return { items: body.events, next: body.next_cursor };
    },
    [JSON.stringify(filters)],
  );
  const filtered = Object.keys(filters).length > 0;
  return (
    <>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && <Busy label="Loading audit events…" />}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title={filtered ? 'No events match these filters.' : 'No audit events yet.'}>
          {filtered
            ? 'Widen the time range or clear the filters.'
            : 'Changes made through the console or the API are recorded here.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table caption="Audit events, newest first" head={['When', 'Event', 'Actor']}>
          {list.items.map((e) => (
            <EventRows key={e.id} event={e} />
          ))}
        </Table>
      )}
      <More list={list} label="Load more events" />
    </>
  );
}

function VerifyChain({ tenantId, permitted }: { tenantId: string | undefined; permitted: boolean }) {
  const [verdict, setVerdict] = useState<Verdict>();
  const verify = useAction(async () => {
    setVerdict(undefined);
    const query = tenantId ? { tenant_id: tenantId } : {};
    setVerdict(await must(api.GET('/admin/v1/audit-events/verify', { params: { query } })));
  });
  return (
    <section aria-labelledby="verify-chain">
      <h2 id="verify-chain">Verify the chain</h2>
      <p>
        Recomputes every stored event's hash, checks each names the one before it, and checks the latest
        signed checkpoint and the pruning anchor.
      </p>
      {permitted && (
        <p>
          <button type="button" disabled={verify.busy} onClick={() => void verify.run()}>
            {verify.busy ? 'Working…' : 'Verify the chain'}
          </button>
        </p>
      )}
      {verify.busy && <Busy label="Verifying the chain…" />}
      <ErrorNote error={verify.error} />
      {verdict && (
        <div class={verdict.ok ? 'notice ok' : 'notice error'} role={verdict.ok ? 'status' : 'alert'}>
          <p>
            <strong>{verdict.ok ? 'The chain holds.' : 'The chain does not hold.'}</strong>{' '}
            {verdict.events_checked} events checked.
          </p>
          <dl class="facts">
            {!verdict.ok && (
              <>
                <dt>First bad position</dt>
                <dd>{verdict.first_bad_seq ?? '—'}</dd>
                <dt>First bad event</dt>
                <dd class="mono">{verdict.first_bad_id ?? '—'}</dd>
              </>
            )}
            <dt>Latest checkpoint</dt>
            <dd>
              {verdict.checkpoint_seq === null
                ? 'none yet'
                : `position ${verdict.checkpoint_seq}: ${verdict.checkpoint_ok ? 'matches' : 'does not match'}`}
            </dd>
            <dt>Pruning anchor</dt>
            <dd>{verdict.anchor_ok ? 'holds' : 'does not hold'}</dd>
          </dl>
        </div>
      )}
    </section>
  );
}

/** Every page of checkpoints, after signing the head now: what the CLI saves. */
async function checkpointFile(query: { tenant_id?: string }) {
  await must(api.POST('/admin/v1/audit-events/checkpoints', { params: { query } }));
  const checkpoints: Checkpoint[] = [];
  let cursor: string | null = null;
  do {
    const page: { checkpoints: Checkpoint[]; next_cursor: string | null } = await must(
      api.GET('/admin/v1/audit-events/checkpoints', {
        params: { query: { ...query, limit: '200', ...(cursor ? { cursor } : {}) } },
      }),
    );
    checkpoints.push(...page.checkpoints);
    cursor = page.next_cursor;
  } while (cursor);
  const keys: AuditKeys = await must(api.GET('/v1/audit/keys'));
  return { checkpoints, keys };
}

/** Saves `body` as a file through a Blob and an object URL (no data: URL), freed after the click. */
function saveJson(name: string, body: unknown) {
  const url = URL.createObjectURL(
    new Blob([`${JSON.stringify(body, null, 2)}\n`], { type: 'application/json' }),
  );
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function Checkpoints({ tenantId, permitted }: { tenantId: string | undefined; permitted: boolean }) {
  const query = tenantId ? { tenant_id: tenantId } : {};
  const list = usePaged(
    async (cursor) => {
      const body = await must(
        api.GET('/admin/v1/audit-events/checkpoints', {
          params: { query: { ...query, ...(cursor ? { cursor } : {}) } },
        }),
      );
      return { items: body.checkpoints, next: body.next_cursor };
    },
    [tenantId],
  );
  const [notice, setNotice] = useState<string>();
  const sign = useAction(async () => {
    setNotice(undefined);
    const { checkpoint } = await must(api.POST('/admin/v1/audit-events/checkpoints', { params: { query } }));
    setNotice(
      checkpoint
        ? `The head is signed at position ${checkpoint.seq}.`
        : 'The chain is empty: nothing to sign yet.',
    );
    list.reload();
  });
  const download = useAction(async () => {
    setNotice(undefined);
    const file = await checkpointFile(query);
    const day = new Date().toISOString().slice(0, 10);
    saveJson(`relayplane-audit-checkpoints-${tenantId ?? 'tenant'}-${day}.json`, file);
    setNotice(`Downloaded ${file.checkpoints.length} checkpoints and the audit key.`);
    list.reload();
  });
  const busy = sign.busy || download.busy;
  return (
    <section aria-labelledby="checkpoints">
      <h2 id="checkpoints">Signed checkpoints</h2>
      <p>
        Each checkpoint is the chain's head signed by the audit key. Save them outside Relayplane and check
        the chain against them later with <code>relayplane audit verify --checkpoints &lt;file&gt;</code>: the
        download is that file (the head signed now, every checkpoint and the public key).
      </p>
      {permitted && (
        <div class="actions">
          <button type="button" class="secondary" disabled={busy} onClick={() => void sign.run()}>
            {sign.busy ? 'Working…' : 'Sign the head now'}
          </button>
          <button type="button" disabled={busy} onClick={() => void download.run()}>
            {download.busy ? 'Working…' : 'Download checkpoints (JSON)'}
          </button>
        </div>
      )}
      {download.busy && <Busy label="Collecting the checkpoints…" />}
      <ErrorNote error={sign.error ?? download.error} />
      {notice && <Done>{notice}</Done>}
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && <Busy label="Loading checkpoints…" />}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="No checkpoints yet.">
          One is signed every few minutes while the chain moves; sign the head now to have one at once.
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table caption="Signed checkpoints, newest first" head={['Position', 'Signed', 'Hash and key']}>
          {list.items.map((c) => (
            <tr key={`${c.seq}-${c.at}`}>
              <td>{c.seq}</td>
              <td>
                <Time at={c.at} />
              </td>
              <td>
                <span class="mono">{c.hash}</span>
                <span class="muted ov-id">
                  key <span class="mono">{c.kid}</span>
                </span>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} label="Load more checkpoints" />
    </section>
  );
}

export function Audit() {
  const { session } = useSession();
  const { query } = useLocation();
  const filters = filtersOf(query);
  const platformAdmin = session.user.platform_admin;
  // Only platform administrators may name another tenant's trail; anyone else reads their own.
  const { tenant_id: _ignored, ...own } = filters;
  const tenantId = platformAdmin ? filters.tenant_id : undefined;
  const permitted = can(session, 'audit:read');
  return (
    <Page title="Audit log">
      <p>
        Every change made through the console or the API, and every sign-in, in a hash chain: each event names
        the one before it, so an edit or a removal shows when the chain is verified.
      </p>
      <h2>Events</h2>
      <FilterForm filters={filters} platformAdmin={platformAdmin} />
      <Events filters={platformAdmin ? filters : own} />
      <VerifyChain tenantId={tenantId} permitted={permitted} />
      <Checkpoints tenantId={tenantId} permitted={permitted} />
    </Page>
  );
}
