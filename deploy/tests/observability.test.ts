/**
 * The chart's operations objects: the PrometheusRule (alerts) and the Grafana dashboard
 * ConfigMap. promtool-style checks in TypeScript: every expression parses with Prometheus' own
 * PromQL grammar (@prometheus-io/lezer-promql), names only metrics the apps export (listed in
 * docs/metrics.md and registered in the apps' code), and every alert carries what an on-call
 * needs (for, severity, summary, description, a runbook anchor that exists in docs/operations.md).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './support/bundle-build.ts';
import {
  byKind,
  dataOf,
  type K8sObject,
  named,
  REQUIRED_SETS,
  render,
  template,
  validateK8s,
} from './support/chart.ts';

const ENABLED = [
  ...REQUIRED_SETS,
  'metrics.serviceMonitor.enabled=true',
  'metrics.prometheusRule.enabled=true',
  'metrics.dashboard.enabled=true',
];

/** What the issue asks the alerts to cover, by the alert that does. */
const REQUIRED_ALERTS = [
  'RelayplaneIssuanceErrorRatioHigh',
  'RelayplaneIssuanceLatencyHigh',
  'RelayplaneUnavailableResponsesHigh',
  'RelayplaneReadinessFlapping',
  'RelayplaneDependencyUnreachable',
  'RelayplaneSigningKeyRotationOverdue',
  'RelayplaneJwksWithoutNextKey',
  'RelayplaneRevocationFeedLagging',
  'RelayplaneTenantNearConnectionCap',
];

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

function rulesOf(o: K8sObject): Rule[] {
  const groups = (o.spec as { groups: { name: string; rules: Rule[] }[] }).groups;
  return groups.flatMap((g) => g.rules);
}

/** Syntax errors and the metric names of a PromQL expression (Prometheus' lezer grammar). */
function analyze(expr: string): { errors: string[]; metrics: string[] } {
  const errors: string[] = [];
  const metrics = new Set<string>();
  const tree = parser.parse(expr);
  tree.iterate({
    enter(node) {
      if (node.type.isError)
        errors.push(`syntax error at ${node.from}: ${expr.slice(node.from, node.from + 40)}`);
      if (node.name === 'VectorSelector') {
        const id = node.node.getChild('Identifier');
        if (id) metrics.add(expr.slice(id.from, id.to));
        else errors.push(`selector without a metric name at ${node.from}`);
      }
    },
  });
  return { errors, metrics: [...metrics] };
}

/** A histogram's series name back to the metric that exports it. */
const baseName = (series: string) => series.replace(/_(bucket|count|sum)$/, '');

/** Metric names docs/metrics.md lists in its table (with their type). */
function documentedMetrics(): Map<string, string> {
  const text = readFileSync(join(repoRoot, 'docs/metrics.md'), 'utf8');
  const found = new Map<string, string>();
  for (const m of text.matchAll(/^\|\s*`(relayplane_[a-z0-9_]+)`\s*\|\s*(counter|gauge|histogram)\s*\|/gm)) {
    found.set(m[1] as string, m[2] as string);
  }
  return found;
}

/** Every non-test TypeScript source under apps/ and packages/ (not node_modules, not generated). */
function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry === 'gen' || entry === 'dist' || entry === 'tests') continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (path.endsWith('.ts') && !path.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

let registered: Set<string> | undefined;
/** Metric names the apps register: `name: 'relayplane_…'` in their sources. */
function registeredMetrics(): Set<string> {
  if (registered) return registered;
  registered = new Set();
  for (const root of ['apps', 'packages']) {
    for (const file of sourceFiles(join(repoRoot, root))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/name:\s*'(relayplane_[a-z0-9_]+)'/g)) {
        registered.add(m[1] as string);
      }
    }
  }
  return registered;
}

function operationsAnchors(): Set<string> {
  const text = readFileSync(join(repoRoot, 'docs/operations.md'), 'utf8');
  const anchors = new Set<string>();
  for (const m of text.matchAll(/^#{1,6}\s+(.+)$/gm)) {
    // GitHub's anchor: lower case, punctuation dropped, spaces to hyphens.
    anchors.add(
      (m[1] as string)
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    );
  }
  return anchors;
}

/** The problems of one expression: syntax, and metrics neither documented nor registered. */
function problems(expr: string): string[] {
  const { errors, metrics } = analyze(expr);
  const documented = documentedMetrics();
  const inCode = registeredMetrics();
  const out = [...errors];
  if (metrics.length === 0) out.push('names no metric');
  for (const series of metrics) {
    const metric = baseName(series);
    if (!documented.has(metric)) out.push(`${series}: not in docs/metrics.md`);
    if (!inCode.has(metric)) out.push(`${series}: no app registers ${metric}`);
    if (series !== metric && documented.get(metric) !== 'histogram')
      out.push(`${series}: ${metric} is no histogram`);
  }
  return out;
}

describe('the checks have teeth', () => {
  it('a syntax error, an unknown metric and a metric only in the docs are each reported', () => {
    expect(problems('sum(rate(relayplane_credentials_issued_total[5m])')).not.toEqual([]);
    expect(problems('rate(relayplane_credentials_issued_totl[5m]) > 0').join()).toContain(
      'not in docs/metrics.md',
    );
    expect(problems('relayplane_http_requests_total_bucket')).toContain(
      'relayplane_http_requests_total_bucket: relayplane_http_requests_total is no histogram',
    );
    expect(problems('sum by (le) (rate(relayplane_http_request_duration_seconds_bucket[5m]))')).toEqual([]);
    expect(analyze('a{b="c"} / on (x) d').metrics.sort()).toEqual(['a', 'd']);
  });
});

describe('PrometheusRule', () => {
  it('is not rendered unless enabled', async () => {
    expect(byKind(await render({ set: REQUIRED_SETS }), 'PrometheusRule')).toEqual([]);
    expect(
      byKind(await render({ set: REQUIRED_SETS }), 'ConfigMap').map((c) => c.metadata.name),
    ).not.toContain('rp-relayplane-dashboard');
  });

  it('renders one valid PrometheusRule with every alert the issue asks for', async () => {
    const objects = await render({ set: ENABLED });
    const [rule, ...more] = byKind(objects, 'PrometheusRule');
    expect(more).toEqual([]);
    if (!rule) throw new Error('no PrometheusRule rendered');
    await expect(validateK8s(rule)).resolves.toBeUndefined();
    expect(rule.metadata).toMatchObject({ name: 'rp-relayplane', namespace: 'relay' });
    expect(rulesOf(rule).map((r) => r.alert)).toEqual(REQUIRED_ALERTS);
  });

  it('every alert parses, names only exported metrics, and carries for, severity, summary, description and a runbook anchor in docs/operations.md', async () => {
    const [rule] = byKind(await render({ set: ENABLED }), 'PrometheusRule');
    if (!rule) throw new Error('no PrometheusRule rendered');
    const anchors = operationsAnchors();
    for (const r of rulesOf(rule)) {
      expect(problems(r.expr), `${r.alert}: ${r.expr}`).toEqual([]);
      expect(r.for, r.alert).toMatch(/^[0-9]+[smh]$/);
      expect(['critical', 'warning', 'info'], r.alert).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.description, r.alert).toBeTruthy();
      const url = r.annotations?.runbook_url ?? '';
      expect(url, r.alert).toMatch(
        /^https:\/\/github\.com\/relayplane\/relayplane\/blob\/main\/docs\/operations\.md#/,
      );
      expect(anchors, `${r.alert}: ${url}`).toContain(url.split('#')[1]);
      // Scoped to this release's apps only.
      expect(r.expr, r.alert).toContain('namespace="relay"');
      expect(r.expr, r.alert).toMatch(/job=~?"rp-relayplane-/);
    }
  });

  it('ratios are guarded against empty traffic and quantiles use rate over the histogram buckets', async () => {
    const [rule] = byKind(await render({ set: ENABLED }), 'PrometheusRule');
    if (!rule) throw new Error('no PrometheusRule rendered');
    for (const r of rulesOf(rule)) {
      if (r.expr.includes('histogram_quantile')) {
        expect(r.expr, r.alert).toMatch(/sum by \([^)]*\ble\b[^)]*\) \(rate\([a-z_]+_bucket\{/);
        expect(r.expr, r.alert).toMatch(/and on \(namespace\)[\s\S]*_count\{[^}]*\}\[[0-9]+m\]\)\) > 0/);
      }
      if (/\)\s*\n\/\n/.test(r.expr) && r.alert !== 'RelayplaneTenantNearConnectionCap') {
        expect(r.expr, r.alert).toMatch(/and on \(namespace\)/);
      }
    }
  });

  it('takes its thresholds, labels, namespace, runbook base and disabled alerts from values', async () => {
    const objects = await render({
      set: [
        ...ENABLED,
        'metrics.prometheusRule.labels.release=prometheus',
        'metrics.prometheusRule.ruleLabels.team=edge',
        'metrics.prometheusRule.namespace=monitoring',
        'metrics.prometheusRule.runbookBaseUrl=https://wiki.example.com/relayplane/ops/',
        'metrics.prometheusRule.disabledAlerts={RelayplaneReadinessFlapping}',
      ],
      // --set reads 0.5 as a string; thresholds are numbers (the schema says so).
      extraArgs: [
        '--set-json',
        'metrics.prometheusRule.thresholds.issuanceP99Seconds=0.5',
        '--set-json',
        'metrics.prometheusRule.thresholds.tenantSlotRatio=0.75',
      ],
    });
    const rule = named(objects, 'PrometheusRule', 'rp-relayplane');
    expect((rule.metadata as { namespace?: string }).namespace).toBe('monitoring');
    expect(rule.metadata.labels?.release).toBe('prometheus');
    const rules = rulesOf(rule);
    expect(rules.map((r) => r.alert)).not.toContain('RelayplaneReadinessFlapping');
    expect(rules.find((r) => r.alert === 'RelayplaneIssuanceLatencyHigh')?.expr).toContain(') > 0.5');
    expect(rules.find((r) => r.alert === 'RelayplaneTenantNearConnectionCap')?.expr).toContain('>= 0.75');
    for (const r of rules) {
      expect(r.labels?.team).toBe('edge');
      expect(r.annotations?.runbook_url).toBe(
        `https://wiki.example.com/relayplane/ops#${r.alert.toLowerCase()}`,
      );
      // Still the release namespace's apps.
      expect(r.expr).toContain('namespace="relay"');
    }
  });

  it('refuses the rule and the dashboard without metrics, saying how to fix it', async () => {
    for (const [key, message] of [
      ['prometheusRule', 'metrics.prometheusRule: enabled while metrics.enabled is false'],
      ['dashboard', 'metrics.dashboard: enabled while metrics.enabled is false'],
    ] as const) {
      const r = await template({
        set: [...REQUIRED_SETS, 'metrics.enabled=false', `metrics.${key}.enabled=true`],
      });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(message);
    }
  });

  it('the schema refuses an unknown alert name and a ratio above 1, naming the value', async () => {
    const unknown = await template({
      set: [...ENABLED, 'metrics.prometheusRule.disabledAlerts={RelayplaneNoSuchAlert}'],
    });
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("at '/metrics/prometheusRule/disabledAlerts/0'");
    const ratio = await template({
      set: [...ENABLED, 'metrics.prometheusRule.thresholds.issuanceErrorRatio=5'],
    });
    expect(ratio.code).not.toBe(0);
    expect(ratio.stderr).toContain("at '/metrics/prometheusRule/thresholds/issuanceErrorRatio'");
  });
});

describe('Grafana dashboard ConfigMap', () => {
  async function dashboard(set: readonly string[] = ENABLED) {
    const cm = named(await render({ set }), 'ConfigMap', 'rp-relayplane-dashboard');
    const json = dataOf(cm)['relayplane.json'];
    if (!json) throw new Error('no relayplane.json in the dashboard ConfigMap');
    return { cm, json, dash: JSON.parse(json) as Dashboard };
  }

  interface Panel {
    type: string;
    title: string;
    targets?: { expr: string }[];
    panels?: Panel[];
  }
  interface Dashboard {
    uid: string;
    title: string;
    panels: Panel[];
    templating: { list: { name: string }[] };
  }

  it('carries the sidecar label (configurable) and the chart file, byte for byte', async () => {
    const { cm, json } = await dashboard();
    await expect(validateK8s(cm)).resolves.toBeUndefined();
    expect(cm.metadata.labels?.grafana_dashboard).toBe('1');
    const file = readFileSync(join(repoRoot, 'deploy/helm/relayplane/dashboards/relayplane.json'), 'utf8');
    expect(json).toBe(file.trimEnd());
    const custom = await dashboard([
      ...ENABLED,
      'metrics.dashboard.label=dashboards',
      'metrics.dashboard.labelValue=relayplane',
      'metrics.dashboard.namespace=grafana',
      'metrics.dashboard.annotations.grafana_folder=Relayplane',
    ]);
    expect(custom.cm.metadata.labels?.dashboards).toBe('relayplane');
    expect(custom.cm.metadata.labels?.grafana_dashboard).toBeUndefined();
    expect(custom.cm.metadata.annotations?.grafana_folder).toBe('Relayplane');
    expect((custom.cm.metadata as { namespace?: string }).namespace).toBe('grafana');
  });

  it('every panel query parses and names only exported metrics', async () => {
    const { dash } = await dashboard();
    const panels = dash.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThanOrEqual(12);
    for (const p of panels) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) {
        // Grafana's interval variable is not PromQL: a duration in its place.
        const expr = t.expr.replaceAll('$__rate_interval', '5m');
        expect(problems(expr), `${p.title}: ${expr}`).toEqual([]);
        expect(t.expr, p.title).toContain('namespace="$namespace"');
      }
    }
    expect(dash.templating.list.map((v) => v.name)).toEqual(['datasource', 'namespace', 'release']);
  });

  it('has the RED panels per app, issuance rate and latency, slot usage and key state', async () => {
    const { dash } = await dashboard();
    const exprs = dash.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)).join('\n');
    for (const needed of [
      'relayplane_http_requests_total',
      'relayplane_http_request_duration_seconds_bucket',
      'relayplane_grpc_server_handled_total',
      'relayplane_grpc_server_handling_seconds_bucket',
      'relayplane_credentials_issued_total',
      'relayplane_credential_issuance_failures_total',
      'relayplane_tenant_slots_in_use',
      'relayplane_issuer_signing_keys',
      'relayplane_issuer_signing_key_rotation_due_timestamp_seconds',
    ]) {
      expect(exprs).toContain(needed);
    }
  });
});
