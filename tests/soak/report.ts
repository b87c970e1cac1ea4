/** How the soak prints its samples as it goes and its summary at the end (Markdown, for docs/performance.md). */
import type { Sample } from './sample.ts';
import { format, type SeriesSummary, WARMUP_SECONDS } from './verdict.ts';

const MiB = 1024 * 1024;

export function clock(seconds: number): string {
  const s = Math.round(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

const percent = (share: number) => `${Math.round(share * 100)} %`;

/** The CPU the soak caused over a sample's interval (cores): apps, load generator, its PostgreSQL backends, Redis. */
const soakCores = (s: Sample) =>
  s.processes.reduce((sum, p) => sum + (p.cpuCores ?? 0), 0) +
  (s.cpu?.loadGeneratorCores ?? 0) +
  (s.cpu?.dependencyCores ?? 0);

const total = (byStatus: Record<string, number>, keep: (status: string) => boolean) =>
  Object.entries(byStatus).reduce((sum, [status, n]) => sum + (keep(status) ? n : 0), 0);

/** Answers per second between two samples, and the 503s and other non-2xx among them. */
function answersBetween(
  previous: Sample | undefined,
  sample: Sample,
): { rate: number; unavailable: number; other: number } | undefined {
  if (!previous) return undefined;
  const delta = (keep: (status: string) => boolean) =>
    total(sample.answersByStatus, keep) - total(previous.answersByStatus, keep);
  const seconds = Math.max(1e-3, sample.elapsedSeconds - previous.elapsedSeconds);
  return {
    rate: Math.round(delta(() => true) / seconds),
    unavailable: delta((s) => s === '503'),
    other: delta((s) => !s.startsWith('2') && s !== '503'),
  };
}

/** One sample as printed while the soak runs. */
export function sampleBlock(sample: Sample, previous: Sample | undefined): string {
  const streams = Object.entries(sample.streams ?? {})
    .map(
      ([name, w]) =>
        ` · ${name} ${w.rps.toLocaleString('en-US')}/s p99 ${w.p99} ms${w.non2xx || w.errors ? ` (non-2xx ${w.non2xx}, errors ${w.errors})` : ''}`,
    )
    .join('');
  const cpu = sample.cpu
    ? ` · machine ${percent(sample.cpu.machineBusy)} busy, the soak ${soakCores(sample).toFixed(2)} cores (load generator ${percent(sample.cpu.loadGeneratorCores)} of a core, PostgreSQL + Redis ${percent(sample.cpu.dependencyCores ?? 0)})`
    : '';
  const a = answersBetween(previous, sample);
  const answers = a
    ? ` · gateways answered ${a.rate.toLocaleString('en-US')}/s (503: ${a.unavailable}, other non-2xx: ${a.other})`
    : '';
  const lines = [
    `── ${clock(sample.elapsedSeconds)}${cpu}${answers}${streams}`,
    `   ${'process'.padEnd(10)} ${'RSS MiB'.padStart(8)} ${'heap MiB'.padStart(9)} ${'heap total'.padStart(11)} ${'external'.padStart(9)} ${'loop p99 ms'.padStart(12)} ${'handles'.padStart(8)} ${'CPU'.padStart(6)}`,
    ...sample.processes.map(
      (p) =>
        `   ${p.name.padEnd(10)} ${(p.rssBytes / MiB).toFixed(1).padStart(8)} ${(p.heapUsedBytes / MiB).toFixed(1).padStart(9)} ${(p.heapTotalBytes / MiB).toFixed(1).padStart(11)} ${(p.externalBytes / MiB).toFixed(1).padStart(9)} ${(p.loopDelayP99Seconds * 1000).toFixed(1).padStart(12)} ${String(p.activeHandles).padStart(8)} ${(p.cpuCores === undefined ? '' : percent(p.cpuCores)).padStart(6)}`,
    ),
    `   PostgreSQL ${sample.postgres.connections} connections (${Object.entries(sample.postgres.byApplication)
      .map(([app, n]) => `${app.replace(/^relayplane-/, '')} ${n}`)
      .join(
        ', ',
      )}) · Redis used_memory ${(sample.redis.usedMemoryBytes / MiB).toFixed(1)} MiB, ${sample.redis.keys} keys under the soak's prefix`,
  ];
  return lines.join('\n');
}

/** Every sample in one Markdown table: each process's RSS, then the system-wide figures. */
export function samplesTable(samples: readonly Sample[]): string {
  const names = samples[0]?.processes.map((p) => p.name) ?? [];
  const header = [
    't',
    ...names.map((n) => `${n} RSS MiB`),
    'heap MiB (all)',
    'loop p99 ms (worst)',
    'handles (all)',
    'PG conn.',
    'Redis MiB',
    'answers/s',
    '503',
    'machine busy',
    'soak CPU (cores)',
  ];
  const rows = samples.map((s, i) => {
    const a = answersBetween(samples[i - 1], s);
    return [
      clock(s.elapsedSeconds),
      ...names.map((n) => ((s.processes.find((p) => p.name === n)?.rssBytes ?? 0) / MiB).toFixed(1)),
      (s.processes.reduce((sum, p) => sum + p.heapUsedBytes, 0) / MiB).toFixed(1),
      (Math.max(...s.processes.map((p) => p.loopDelayP99Seconds)) * 1000).toFixed(1),
      String(s.processes.reduce((sum, p) => sum + p.activeHandles, 0)),
      String(s.postgres.connections),
      (s.redis.usedMemoryBytes / MiB).toFixed(1),
      a ? a.rate.toLocaleString('en-US') : '',
      a ? String(a.unavailable) : '',
      s.cpu ? percent(s.cpu.machineBusy) : '',
      s.cpu ? soakCores(s).toFixed(2) : '',
    ];
  });
  return markdown(header, rows);
}

/**
 * Where each app's RSS sits, every sample: V8's heap (`heap total`, what V8 reserved) and the
 * rest (RSS − heap total: native memory — malloc arenas, thread stacks, code — and Buffers),
 * so that a rise of RSS shows on which side it is.
 */
export function memoryTable(samples: readonly Sample[]): string {
  const names = samples[0]?.processes.map((p) => p.name) ?? [];
  const header = ['t', ...names.map((n) => `${n} heap total / rest MiB`)];
  const rows = samples.map((s) => [
    clock(s.elapsedSeconds),
    ...names.map((n) => {
      const p = s.processes.find((q) => q.name === n);
      return p
        ? `${(p.heapTotalBytes / MiB).toFixed(1)} / ${((p.rssBytes - p.heapTotalBytes) / MiB).toFixed(1)}`
        : '';
    }),
  ]);
  return markdown(header, rows);
}

/** Each series: its values at the start, at the end of the warm-up and at the end, and its trend. */
export function seriesTable(series: readonly SeriesSummary[]): string {
  const header = [
    'series',
    'start',
    `at ${clock(WARMUP_SECONDS)}`,
    'end',
    'max',
    'fitted rise from there',
    'steps up',
    'verdict',
  ];
  const rows = series.map((s) => {
    const values = s.points.map((p) => p.value);
    const t = s.trend;
    return [
      s.name,
      format(values[0] ?? 0, s.unit),
      s.atWarmup === undefined ? '–' : format(s.atWarmup, s.unit),
      format(values.at(-1) ?? 0, s.unit),
      format(Math.max(...values), s.unit),
      t.judged ? `${format(t.projectedRise, s.unit)} (threshold ${format(t.threshold, s.unit)})` : '–',
      t.steps ? `${t.risingSteps}/${t.steps}` : '–',
      !t.judged ? 'not judged' : t.rising ? '**rises**' : 'steady',
    ];
  });
  return markdown(header, rows);
}

function markdown(header: string[], rows: string[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}
