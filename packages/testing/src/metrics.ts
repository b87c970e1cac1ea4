/** Reading Prometheus text exposition in tests. */

/** Fetches `url` (a metrics endpoint) and returns its body; throws unless it answers 200. */
export async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`scrape of ${url} answered ${res.status}: ${text}`);
  return text;
}

function parseLabels(raw: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const m of raw.matchAll(re)) {
    labels[m[1] as string] = (m[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  }
  return labels;
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample line of an exposition. */
export function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const raw = m[3] as string;
    const value =
      raw === '+Inf' ? Number.POSITIVE_INFINITY : raw === '-Inf' ? Number.NEGATIVE_INFINITY : Number(raw);
    out.push({ name: m[1] as string, labels: parseLabels(m[2] ?? ''), value });
  }
  return out;
}

/**
 * The value of the one sample named `name` whose labels are exactly `labels`; 0 when there
 * is none (a counter not yet touched). Throws when several match.
 */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels);
  const found = samples(text).filter(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === wanted.length &&
      wanted.every(([k, v]) => s.labels[k] === v),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value ?? 0;
}

/** Whether the exposition declares a metric `name` of `type` (`# TYPE name type`). */
export function hasMetric(text: string, name: string, type: string): boolean {
  return text.split('\n').includes(`# TYPE ${name} ${type}`);
}
