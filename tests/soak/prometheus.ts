/**
 * Reads the Prometheus text exposition format (version 0.0.4) the apps' metrics listeners
 * answer: enough for plain samples (`name{label="value",…} number`), which is all the soak
 * reads — gauges, counters and the event-loop summary prom-client exports as gauges.
 * Comments (`# HELP`, `# TYPE`) and blank lines are skipped; timestamps after the value are
 * ignored.
 */

export interface MetricSample {
  labels: Record<string, string>;
  value: number;
}

export type Metrics = Map<string, MetricSample[]>;

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescapeLabel(value: string): string {
  return value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

export function parsePrometheus(text: string): Metrics {
  const metrics: Metrics = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (!match) continue;
    const [, name = '', labelText = '', valueText = ''] = match;
    const labels: Record<string, string> = {};
    for (const [, key = '', value = ''] of labelText.matchAll(LABEL)) labels[key] = unescapeLabel(value);
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : Number(valueText);
    const samples = metrics.get(name) ?? [];
    samples.push({ labels, value });
    metrics.set(name, samples);
  }
  return metrics;
}

/** The value of an unlabelled metric (the first sample's), or undefined when it is absent. */
export function metricValue(metrics: Metrics, name: string): number | undefined {
  return metrics.get(name)?.[0]?.value;
}
