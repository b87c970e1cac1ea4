/**
 * The soak's pass/fail rules over its samples and the gateways' answer counts:
 *
 * - **no 5xx but 503**: every request of the mix is valid, so the only server error allowed is
 *   the documented 503 + Retry-After of a moment's unavailability; and no other non-2xx
 *   either — a 4xx means the mix itself broke (an expired credential, a throttle) and the
 *   load it claims to apply is not what ran;
 * - **RSS growth**: no process's RSS more than RSS_GROWTH_LIMIT above its sample at the end
 *   of the warm-up (the first two minutes: JIT, pools, caches and the first credentials' slot
 *   sets fill there), at any later sample;
 * - **no steady rise** (trend.ts) of any sampled series over the samples from the end of the
 *   warm-up on.
 */
import type { ProcessSample, Sample } from './sample.ts';
import { MIN_POINTS, type Point, type RiseRule, type RiseVerdict, steadyRise } from './trend.ts';

export const WARMUP_SECONDS = 120;
export const SAMPLE_SECONDS = 30;
export const RSS_GROWTH_LIMIT = 0.1;
/** Every series: a steady rise must reach 5 % of its level, and its kind's absolute floor. */
const RELATIVE_RISE = 0.05;
const MiB = 1024 * 1024;

export interface Unit {
  name: string;
  /** Divides the raw value for display. */
  scale: number;
  digits: number;
}

const UNITS = {
  mib: { name: 'MiB', scale: MiB, digits: 1 },
  ms: { name: 'ms', scale: 1e-3, digits: 1 },
  count: { name: '', scale: 1, digits: 0 },
  cores: { name: 'cores', scale: 1, digits: 2 },
} satisfies Record<string, Unit>;

interface SeriesKind {
  label: string;
  unit: Unit;
  /**
   * The smallest rise over the judged window that counts. RSS and heap: 4 MiB, beneath the
   * wobble of a Node process under load. Event-loop delay: 10 ms, prom-client's sampling
   * resolution. CPU: 5 % of a core. Handles, connections: a few, for pools that open one
   * more under a burst.
   * Redis keys: 100, about 20 s of the mix's revocation marks.
   */
  absolute: number;
}

/** `read` answers undefined where a sample has no value (CPU in the first sample). */
const PROCESS_KINDS: (SeriesKind & { read: (p: ProcessSample) => number | undefined })[] = [
  { label: 'RSS', unit: UNITS.mib, absolute: 4 * MiB, read: (p) => p.rssBytes },
  { label: 'heap used', unit: UNITS.mib, absolute: 4 * MiB, read: (p) => p.heapUsedBytes },
  { label: 'heap total', unit: UNITS.mib, absolute: 4 * MiB, read: (p) => p.heapTotalBytes },
  { label: 'external', unit: UNITS.mib, absolute: 4 * MiB, read: (p) => p.externalBytes },
  { label: 'loop delay p99', unit: UNITS.ms, absolute: 0.01, read: (p) => p.loopDelayP99Seconds },
  { label: 'handles', unit: UNITS.count, absolute: 5, read: (p) => p.activeHandles },
  { label: 'CPU', unit: UNITS.cores, absolute: 0.05, read: (p) => p.cpuCores },
];

const SYSTEM_KINDS: (SeriesKind & { read: (s: Sample) => number })[] = [
  { label: 'PostgreSQL connections', unit: UNITS.count, absolute: 3, read: (s) => s.postgres.connections },
  { label: 'Redis used_memory', unit: UNITS.mib, absolute: 4 * MiB, read: (s) => s.redis.usedMemoryBytes },
  { label: 'Redis keys (soak prefix)', unit: UNITS.count, absolute: 100, read: (s) => s.redis.keys },
];

export interface SeriesSummary {
  /** `gateway-0 RSS`, `PostgreSQL connections`, … */
  name: string;
  unit: Unit;
  points: Point[];
  /** The value at the end of the warm-up (the first sample at or after it), if the run got there. */
  atWarmup: number | undefined;
  trend: RiseVerdict;
}

/** One gateway counter: answers of one route and status. */
export interface RouteAnswers {
  method: string;
  route: string;
  status: string;
  count: number;
}

export interface Verdict {
  series: SeriesSummary[];
  /** Why the soak fails; empty when it passes. */
  failures: string[];
  /** What could not be judged (too short a run), said aloud rather than passed silently. */
  notJudged: string[];
}

export function format(value: number, unit: Unit): string {
  const shown = (value / unit.scale).toFixed(unit.digits);
  return unit.name ? `${shown} ${unit.name}` : shown;
}

const ruleOf = (kind: SeriesKind): RiseRule => ({ relative: RELATIVE_RISE, absolute: kind.absolute });

function summarise(name: string, unit: Unit, rule: RiseRule, points: Point[]): SeriesSummary {
  const judged = points.filter((p) => p.t >= WARMUP_SECONDS);
  return { name, unit, points, atWarmup: judged[0]?.value, trend: steadyRise(judged, rule) };
}

export function seriesOf(samples: readonly Sample[]): SeriesSummary[] {
  const names = samples[0]?.processes.map((p) => p.name) ?? [];
  const series: SeriesSummary[] = [];
  for (const name of names) {
    for (const kind of PROCESS_KINDS) {
      const points = samples.flatMap((s) => {
        const p = s.processes.find((q) => q.name === name);
        const value = p ? kind.read(p) : undefined;
        return value === undefined ? [] : [{ t: s.elapsedSeconds, value }];
      });
      series.push(summarise(`${name} ${kind.label}`, kind.unit, ruleOf(kind), points));
    }
  }
  for (const kind of SYSTEM_KINDS) {
    const points = samples.map((s) => ({ t: s.elapsedSeconds, value: kind.read(s) }));
    series.push(summarise(kind.label, kind.unit, ruleOf(kind), points));
  }
  return series;
}

/** The failures the gateways' answer counts show: any 5xx but 503, and any other non-2xx. */
export function judgeAnswers(answers: readonly RouteAnswers[]): string[] {
  const failures: string[] = [];
  for (const a of answers) {
    if (a.count === 0 || a.status.startsWith('2') || a.status === '503') continue;
    failures.push(
      a.status.startsWith('5')
        ? `${a.count} × ${a.status} on ${a.method} ${a.route}: no 5xx but 503 is allowed`
        : `${a.count} × ${a.status} on ${a.method} ${a.route}: every request of the mix is valid, so the mix broke`,
    );
  }
  return failures;
}

export function judgeSamples(samples: readonly Sample[]): Verdict {
  const series = seriesOf(samples);
  const failures: string[] = [];
  const notJudged: string[] = [];
  for (const s of series.filter((x) => x.name.endsWith(' RSS'))) {
    const later = s.points.filter((p) => p.t > WARMUP_SECONDS);
    if (s.atWarmup === undefined || later.length === 0) {
      notJudged.push(`${s.name} growth: no sample after the ${WARMUP_SECONDS / 60}-minute mark`);
      continue;
    }
    const peak = Math.max(...later.map((p) => p.value));
    const growth = peak / s.atWarmup - 1;
    if (growth > RSS_GROWTH_LIMIT) {
      failures.push(
        `${s.name} grew ${(growth * 100).toFixed(1)} % after the first ${WARMUP_SECONDS / 60} minutes ` +
          `(${format(s.atWarmup, s.unit)} → ${format(peak, s.unit)}; limit ${RSS_GROWTH_LIMIT * 100} %)`,
      );
    }
  }
  for (const s of series) {
    const t = s.trend;
    if (!t.judged) continue;
    if (t.rising) {
      failures.push(
        `${s.name} rises steadily: the fitted line climbs ${format(t.projectedRise, s.unit)} over the window ` +
          `(threshold ${format(t.threshold, s.unit)}), ${t.risingSteps} of ${t.steps} steps up`,
      );
    }
  }
  const judgedSamples = samples.filter((s) => s.elapsedSeconds >= WARMUP_SECONDS).length;
  if (series.some((s) => !s.trend.judged)) {
    notJudged.push(
      `trends: ${judgedSamples} sample(s) from the ${WARMUP_SECONDS / 60}-minute mark on; ` +
        `a trend needs ${MIN_POINTS} (a run of at least ${(WARMUP_SECONDS + (MIN_POINTS - 1) * SAMPLE_SECONDS) / 60} minutes)`,
    );
  }
  return { series, failures, notJudged };
}
