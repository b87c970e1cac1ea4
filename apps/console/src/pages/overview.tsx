/**
 * The tenant at a glance: live sessions against the cap (a gauge), credentials issued and session
 * minutes per day over the last 30 UTC days (a chart, with the numbers as a table), the last audit
 * events and the plan. Each card loads on its own and shows its own refusal (a viewer has no
 * `audit:read`, for one), so one refused call never hides the others.
 */
import { useEffect, useMemo } from 'preact/hooks';
import { type paths as ApiPaths, api, must } from '../api.ts';
import { paths } from '../routes.ts';
import { Chart, type ChartSeries } from '../ui/chart.tsx';
import { Gauge } from '../ui/gauge.tsx';
import { Badge, Busy, Empty, ErrorNote, Page, Table, Time, useLoad } from '../ui/kit.tsx';
import { priceText, utcDay } from './billing.tsx';
import '../ui/overview.css';

const number = new Intl.NumberFormat();
const minutes = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const dayLabel = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'UTC' });

/** Every UTC day from `from` to `to`, inclusive. */
function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000) {
    out.push(new Date(t).toISOString().slice(0, 10));
  }
  return out;
}

function ConnectionsCard() {
  const state = useLoad(() => must(api.GET('/admin/v1/tenant/connections')));
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') state.reload();
    }, 30_000);
    return () => clearInterval(timer);
  }, []);
  const c = state.data;
  return (
    <section class="card ov-card" aria-labelledby="ov-conn">
      <h2 id="ov-conn">Connections now</h2>
      {c ? (
        <Gauge value={c.slots_held} max={c.cap} label="Connection slots held" unit="slots">
          <p class="ov-stat">
            <strong>{number.format(c.live_sessions)}</strong> live relay{' '}
            {c.live_sessions === 1 ? 'session' : 'sessions'}
          </p>
          <p class="muted">
            {number.format(c.slots_held)} of {number.format(c.cap)} slots held (the plan's cap). A slot is a
            live session or a credential issued that has not connected yet. Updated every 30 seconds.
          </p>
        </Gauge>
      ) : state.loading ? (
        <Busy label="Loading connections…" />
      ) : null}
      <ErrorNote error={state.error} />
    </section>
  );
}

type UsageDay =
  ApiPaths['/admin/v1/billing/usage']['get']['responses'][200]['content']['application/json']['days'][number];

function UsageCard() {
  const from = utcDay(29);
  const to = utcDay(0);
  const state = useLoad(() => must(api.GET('/admin/v1/billing/usage', { params: { query: { from, to } } })));
  const days = useMemo(() => daysBetween(from, to), [from, to]);
  const totals = useMemo(() => {
    const byDay = new Map<string, UsageDay>();
    for (const row of state.data?.days ?? []) if (row.project_id === null) byDay.set(row.day, row);
    return byDay;
  }, [state.data]);
  const series = useMemo(
    (): ChartSeries[] => [
      {
        label: 'Credentials issued',
        values: days.map((d) => totals.get(d)?.credentials_issued ?? 0),
        colorVar: '--accent',
        kind: 'bars',
        side: 'left',
        integer: true,
        format: (v) => number.format(v),
      },
      {
        label: 'Session minutes',
        values: days.map((d) => totals.get(d)?.session_minutes ?? 0),
        colorVar: '--warn',
        kind: 'line',
        side: 'right',
        format: (v) => minutes.format(v),
      },
    ],
    [days, totals],
  );
  const issued = [...totals.values()].reduce((n, r) => n + r.credentials_issued, 0);
  const used = [...totals.values()].reduce((n, r) => n + r.session_minutes, 0);
  return (
    <section class="card ov-card ov-wide" aria-labelledby="ov-usage">
      <h2 id="ov-usage">Usage, last 30 days</h2>
      <ErrorNote error={state.error} />
      {state.loading && !state.data && <Busy label="Loading usage…" />}
      {state.data && totals.size === 0 && (
        <Empty title="No usage recorded in the last 30 days.">
          Issue a relay credential with one of your <a href={paths.projects}>projects</a>' API keys. Usage is
          aggregated by background jobs, so today's numbers fill in over the day.
        </Empty>
      )}
      {state.data && totals.size > 0 && (
        <Chart
          caption="Credentials issued (bars, left axis) and session minutes (line, right axis) per UTC day"
          days={days}
          series={series}
        >
          <p>
            From {dayLabel.format(new Date(`${from}T00:00:00Z`))} to{' '}
            {dayLabel.format(new Date(`${to}T00:00:00Z`))} (UTC): <strong>{number.format(issued)}</strong>{' '}
            credentials issued, <strong>{minutes.format(used)}</strong> session minutes.{' '}
            <span class="muted">Aggregated by background jobs: today fills in over the day.</span>
          </p>
          <details class="ov-details">
            <summary>The numbers by day</summary>
            <Table
              caption="Credentials issued and session minutes per UTC day"
              head={['Day (UTC)', 'Credentials issued', 'Session minutes']}
            >
              {days.map((d) => (
                <tr key={d}>
                  <td>{d}</td>
                  <td>{number.format(totals.get(d)?.credentials_issued ?? 0)}</td>
                  <td>{minutes.format(totals.get(d)?.session_minutes ?? 0)}</td>
                </tr>
              ))}
            </Table>
          </details>
        </Chart>
      )}
      <p class="ov-more">
        <a href={paths.billing}>Usage this month and the plan's limits</a>
      </p>
    </section>
  );
}

const OUTCOME_TONE = { success: 'ok', failure: 'bad', denied: 'warn' } as const;

function AuditCard() {
  const state = useLoad(() =>
    must(api.GET('/admin/v1/audit-events', { params: { query: { limit: '10' } } })),
  );
  const events = state.data?.events ?? [];
  return (
    <section class="card ov-card ov-wide" aria-labelledby="ov-audit">
      <h2 id="ov-audit">Last audit events</h2>
      <ErrorNote error={state.error} />
      {state.loading && !state.data && <Busy label="Loading audit events…" />}
      {state.data && events.length === 0 && (
        <Empty title="No audit events yet.">
          Changes made through the console or the API are recorded here.
        </Empty>
      )}
      {events.length > 0 && (
        <Table caption="The last 10 audit events, newest first" head={['When', 'Event', 'Actor']}>
          {events.map((e) => (
            <tr key={e.id}>
              <td>
                <Time at={e.occurred_at} />
              </td>
              <td>
                <code class="ov-action">{e.action}</code>{' '}
                <Badge tone={OUTCOME_TONE[e.outcome]}>{e.outcome}</Badge>
              </td>
              <td>
                {e.actor.type}
                {e.actor.id && <span class="mono ov-id">{e.actor.id}</span>}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <p class="ov-more">
        <a href={paths.audit}>Open the audit log</a> to filter, verify the chain and download checkpoints.
      </p>
    </section>
  );
}

function PlanCard() {
  const state = useLoad(() => must(api.GET('/admin/v1/billing/subscription')));
  const plan = state.data?.plan;
  return (
    <section class="card ov-card" aria-labelledby="ov-plan">
      <h2 id="ov-plan">Plan</h2>
      <ErrorNote error={state.error} />
      {state.loading && !state.data && <Busy label="Loading the plan…" />}
      {plan && (
        <>
          <p class="ov-stat">
            <strong>{plan.name}</strong> · {priceText(plan.price)}
          </p>
          <dl class="facts">
            <dt>Concurrent connections</dt>
            <dd>{number.format(plan.limits.max_concurrent_connections)}</dd>
            <dt>Projects</dt>
            <dd>{number.format(plan.limits.max_projects)}</dd>
            <dt>API keys</dt>
            <dd>{number.format(plan.limits.max_api_keys)}</dd>
            <dt>Changed</dt>
            <dd>
              {state.data?.updated_at ? <Time at={state.data.updated_at} /> : 'never (the default plan)'}
            </dd>
          </dl>
        </>
      )}
      <p class="ov-more">
        <a href={paths.billing}>Billing: plans, usage and checkout</a>
      </p>
    </section>
  );
}

export function Overview() {
  return (
    <Page title="Overview">
      <div class="ov-grid">
        <ConnectionsCard />
        <PlanCard />
        <UsageCard />
        <AuditCard />
      </div>
    </Page>
  );
}
