import { describe, expect, it } from 'vitest';
import { metricValue, parsePrometheus } from './prometheus.ts';

const TEXT = `# HELP nodejs_heap_size_used_bytes Process heap size used from Node.js in bytes.
# TYPE nodejs_heap_size_used_bytes gauge
nodejs_heap_size_used_bytes 12345678

nodejs_eventloop_lag_p99_seconds 0.012582911
relayplane_http_requests_total{method="POST",route="/api/v1/credentials",status="201"} 4096
relayplane_http_requests_total{method="GET",route="/admin/v1/projects/:project_id/api-keys",status="503"} 2
odd_label{message="a \\"quoted\\" word, a \\\\ and\\na line"} 1 1700000000000
nodejs_gc_duration_seconds_bucket{le="+Inf",kind="major"} 7
`;

describe('parsePrometheus', () => {
  const metrics = parsePrometheus(TEXT);

  it('reads unlabelled samples and skips comments and blank lines', () => {
    expect(metricValue(metrics, 'nodejs_heap_size_used_bytes')).toBe(12345678);
    expect(metricValue(metrics, 'nodejs_eventloop_lag_p99_seconds')).toBeCloseTo(0.012582911);
    expect([...metrics.keys()]).not.toContain('#');
  });

  it('keeps every labelled sample of a metric with its labels', () => {
    expect(metrics.get('relayplane_http_requests_total')).toEqual([
      { labels: { method: 'POST', route: '/api/v1/credentials', status: '201' }, value: 4096 },
      {
        labels: { method: 'GET', route: '/admin/v1/projects/:project_id/api-keys', status: '503' },
        value: 2,
      },
    ]);
  });

  it('unescapes label values and ignores a timestamp after the value', () => {
    expect(metrics.get('odd_label')).toEqual([
      { labels: { message: 'a "quoted" word, a \\ and\na line' }, value: 1 },
    ]);
    expect(metrics.get('nodejs_gc_duration_seconds_bucket')?.[0]?.labels).toEqual({
      le: '+Inf',
      kind: 'major',
    });
  });

  it('answers undefined for an absent metric', () => {
    expect(metricValue(metrics, 'nodejs_active_handles_total')).toBeUndefined();
  });
});
