/**
 * Billing: the tenant's plan, the plans with their limits and prices, this month's usage, and a
 * checkout per plan. A checkout session answers the URL where the change is confirmed (the
 * built-in provider's page on this gateway, or Stripe Checkout), which the page follows; a
 * refusal — the built-in provider with paid checkout off answers 422 — is shown as the API said it.
 */
import { useMemo, useState } from 'preact/hooks';
import { type paths as ApiPaths, api, type components, must } from '../api.ts';
import { paths } from '../routes.ts';
import { can, useSession } from '../session.tsx';
import {
  Badge,
  Busy,
  Empty,
  ErrorNote,
  More,
  Page,
  Table,
  Time,
  useAction,
  useLoad,
  usePaged,
} from '../ui/kit.tsx';
import '../ui/overview.css';

type Plan = components['schemas']['Plan'];
type UsageDay =
  ApiPaths['/admin/v1/billing/usage']['get']['responses'][200]['content']['application/json']['days'][number];

const number = new Intl.NumberFormat();
const minutes = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const monthName = new Intl.DateTimeFormat(undefined, { month: 'long', year: 'numeric', timeZone: 'UTC' });

/** Bytes in the largest unit that keeps the number above 1 (1000-based). */
function bytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${new Intl.NumberFormat(undefined, { maximumFractionDigits: i === 0 ? 0 : 1 }).format(v)} ${units[i]}`;
}

/** A plan's price as people read it (amounts are monthly, in minor units). */
export function priceText(price: components['schemas']['Price']): string {
  if (price.contact_sales) return 'Price on request';
  if (price.monthly_amount_minor === 0) return 'No charge';
  const money = new Intl.NumberFormat(undefined, {
    style: 'currency',
    currency: price.currency.toUpperCase(),
  });
  return `${money.format(price.monthly_amount_minor / 100)} a month`;
}

/** `YYYY-MM-DD` of the UTC day `back` days before today. */
export function utcDay(back = 0, now = new Date()): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - back))
    .toISOString()
    .slice(0, 10);
}

function seconds(n: number): string {
  return n % 3600 === 0 ? `${n / 3600} h` : n % 60 === 0 ? `${n / 60} min` : `${n} s`;
}

function Limits({ limits }: { limits: Plan['limits'] }) {
  return (
    <dl class="facts">
      <dt>Concurrent connections</dt>
      <dd>{number.format(limits.max_concurrent_connections)}</dd>
      <dt>Projects</dt>
      <dd>{number.format(limits.max_projects)}</dd>
      <dt>API keys</dt>
      <dd>{number.format(limits.max_api_keys)}</dd>
      <dt>Bots</dt>
      <dd>{number.format(limits.max_bots)}</dd>
      <dt>Allowlist entries</dt>
      <dd>{number.format(limits.max_allowlist_entries)}</dd>
      <dt>Credential lifetime</dt>
      <dd>up to {seconds(limits.max_credential_ttl_seconds)}</dd>
      <dt>Issuance per key</dt>
      <dd>{number.format(limits.max_issuance_per_second_per_key)} a second</dd>
      <dt>Webhook endpoints</dt>
      <dd>{number.format(limits.max_webhook_endpoints)} per project</dd>
    </dl>
  );
}

/** Follows a checkout URL only when it is http(s) (the built-in page is relative to this gateway). */
function follow(url: string) {
  const target = new URL(url, location.origin);
  if (target.protocol !== 'https:' && target.protocol !== 'http:') {
    throw new Error(`The checkout answered an address the console will not open: ${url}`);
  }
  location.assign(target.href);
}

function PlanCard({ plan, current, writable }: { plan: Plan; current: boolean; writable: boolean }) {
  const [leaving, setLeaving] = useState(false);
  const checkout = useAction(async () => {
    const session = await must(
      api.POST('/admin/v1/billing/checkout-sessions', {
        params: { header: { 'idempotency-key': crypto.randomUUID() } },
        body: { plan: plan.id },
      }),
    );
    setLeaving(true);
    follow(session.url);
  });
  const headingId = `plan-${plan.id}`;
  return (
    <section class={current ? 'card ov-current' : 'card'} aria-labelledby={headingId}>
      <h3 id={headingId}>
        {plan.name} {current && <Badge tone="ok">current plan</Badge>}
      </h3>
      <p class="ov-price">{priceText(plan.price)}</p>
      <Limits limits={plan.limits} />
      {writable && !current && (
        <div class="actions">
          <button type="button" disabled={checkout.busy || leaving} onClick={() => void checkout.run()}>
            {checkout.busy || leaving ? 'Working…' : `Switch to ${plan.name}`}
          </button>
        </div>
      )}
      {leaving && <p role="status">Opening the checkout page…</p>}
      <ErrorNote error={checkout.error} />
    </section>
  );
}

function Plans({ currentId, writable }: { currentId: string | undefined; writable: boolean }) {
  const list = usePaged(async (cursor) => {
    const body = await must(api.GET('/v1/plans', { params: { query: cursor ? { cursor } : {} } }));
    return { items: body.plans, next: body.next_cursor };
  });
  return (
    <section aria-labelledby="plans">
      <h2 id="plans">Plans</h2>
      <p>
        Switching opens the billing provider's page, where the change is confirmed (and paid for, with a paid
        provider). A move to a smaller plan keeps what exists; new things over its limits are refused.
        {!writable && ' Only owners and admins may change the plan.'}
      </p>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && <Busy label="Loading plans…" />}
      <div class="ov-plans">
        {list.items.map((p) => (
          <PlanCard key={p.id} plan={p} current={p.id === currentId} writable={writable} />
        ))}
      </div>
      <More list={list} label="Load more plans" />
    </section>
  );
}

function Usage() {
  const to = utcDay(0);
  const from = `${to.slice(0, 8)}01`;
  const state = useLoad(() => must(api.GET('/admin/v1/billing/usage', { params: { query: { from, to } } })));
  const rows = state.data?.days ?? [];
  const tenant = useMemo(
    () => rows.filter((r) => r.project_id === null).sort((a, b) => a.day.localeCompare(b.day)),
    [rows],
  );
  const projects = useMemo(() => {
    const by = new Map<string, { issued: number; minutes: number; ended: number }>();
    for (const r of rows) {
      if (r.project_id === null) continue;
      const t = by.get(r.project_id) ?? { issued: 0, minutes: 0, ended: 0 };
      by.set(r.project_id, {
        issued: t.issued + r.credentials_issued,
        minutes: t.minutes + r.session_minutes,
        ended: t.ended + r.sessions_ended,
      });
    }
    return [...by.entries()];
  }, [rows]);
  const sum = (f: (r: UsageDay) => number) => tenant.reduce((n, r) => n + f(r), 0);
  const month = monthName.format(new Date(`${from}T00:00:00Z`));
  return (
    <section aria-labelledby="usage">
      <h2 id="usage">Usage in {month}</h2>
      <ErrorNote error={state.error} />
      {state.loading && !state.data && <Busy label="Loading usage…" />}
      {state.data && tenant.length === 0 && (
        <Empty title={`No usage recorded in ${month} yet.`}>
          Issue a relay credential with one of your <a href={paths.projects}>projects</a>' API keys. Usage is
          aggregated by background jobs, so today's numbers fill in over the day.
        </Empty>
      )}
      {tenant.length > 0 && (
        <>
          <p>
            {month} so far (UTC days): <strong>{number.format(sum((r) => r.credentials_issued))}</strong>{' '}
            credentials issued, <strong>{number.format(sum((r) => r.sessions_ended))}</strong> sessions ended,{' '}
            <strong>{minutes.format(sum((r) => r.session_minutes))}</strong> session minutes, highest
            concurrency{' '}
            <strong>{number.format(Math.max(...tenant.map((r) => r.peak_concurrent_connections)))}</strong>.{' '}
            <span class="muted">Aggregated by background jobs: today fills in over the day.</span>
          </p>
          <Table
            caption={`Tenant usage per UTC day in ${month}`}
            head={[
              'Day (UTC)',
              'Credentials issued',
              'Peak concurrent',
              'Sessions ended',
              'Session minutes',
              'Sent',
              'Received',
            ]}
          >
            {tenant.map((r) => (
              <tr key={r.day}>
                <td>{r.day}</td>
                <td>{number.format(r.credentials_issued)}</td>
                <td>{number.format(r.peak_concurrent_connections)}</td>
                <td>{number.format(r.sessions_ended)}</td>
                <td>{minutes.format(r.session_minutes)}</td>
                <td>{bytes(r.bytes_sent)}</td>
                <td>{bytes(r.bytes_received)}</td>
              </tr>
            ))}
          </Table>
        </>
      )}
      {projects.length > 0 && (
        <>
          <h3>By project</h3>
          <Table
            caption={`Usage per project in ${month}`}
            head={['Project', 'Credentials issued', 'Sessions ended', 'Session minutes']}
          >
            {projects.map(([id, t]) => (
              <tr key={id}>
                <td>
                  <a class="mono" href={paths.project(id)}>
                    {id}
                  </a>
                </td>
                <td>{number.format(t.issued)}</td>
                <td>{number.format(t.ended)}</td>
                <td>{minutes.format(t.minutes)}</td>
              </tr>
            ))}
          </Table>
        </>
      )}
    </section>
  );
}

export function Billing() {
  const { session } = useSession();
  const state = useLoad(() => must(api.GET('/admin/v1/billing/subscription')));
  const sub = state.data;
  return (
    <Page title="Billing">
      <section aria-labelledby="current">
        <h2 id="current">Current plan</h2>
        <ErrorNote error={state.error} />
        {state.loading && !sub && <Busy label="Loading the plan…" />}
        {sub && (
          <p class="ov-stat">
            <strong>{sub.plan.name}</strong> · {priceText(sub.plan.price)} ·{' '}
            <span class="muted">
              {sub.updated_at ? (
                <>
                  changed <Time at={sub.updated_at} />
                </>
              ) : (
                'the default plan'
              )}
            </span>
          </p>
        )}
      </section>
      <Plans currentId={sub?.plan.id} writable={can(session, 'billing:write')} />
      <Usage />
    </Page>
  );
}
