/**
 * `pnpm bench:ab`: what one change costs per issued credential, measured as a paired comparison.
 *
 * Two variants of the distributed 1 × 1 mode (one gateway, one issuer, admin, billing, on the
 * PostgreSQL and Redis of `pnpm bench`) run at the same time, each on its own database and Redis
 * prefix, and are loaded in turn: issuance for `BENCH_AB_SLICE_SECONDS` (default 4) on one, then on
 * the other, `BENCH_AB_PAIRS` times (default 16), the order flipping every pair so that the
 * machine's drift falls on both sides, after a warm-up of `BENCH_AB_WARMUP_SECONDS` (default 10)
 * each. The pairs are spread over `BENCH_AB_STARTS` (default 8) starts of both variants afresh: two
 * systems of the same code can differ by up to 20 % for as long as they run, so no one pair of
 * systems decides. Each slice gives the CPU each of the variant's processes spent per issued
 * credential (`/proc/<pid>/stat`); the figure compared is the sum over the four apps (the load
 * generator, PostgreSQL and Redis are the same for both). Each pair gives a ratio B / A; the report
 * prints every pair's, their median and range, the ratio of all B slices' CPU per credential to all
 * A slices' (each slice weighted by its credentials), and the rates. `OTEL_SDK_DISABLED=true` with
 * the default kind is an A/A run: the method's own noise.
 *
 * The load of a measured slice (`BENCH_AB_LOAD`):
 * - `rate` (default): an open-loop load at one steady rate for both variants (`paced.ts`), the
 *   same within a start: `BENCH_AB_RATE_SHARE` (default 0.6) of the lower of the two variants'
 *   closed-loop rates in their last warm-up turn. Both sides then see the same arrivals, so the
 *   stages batch alike (a stream message, a slot script and an `INSERT` serve what arrived
 *   meanwhile) and a credential's CPU is compared at equal load. A slice whose rate falls more
 *   than 3 % short of the target (a side that could not keep up) fails the run.
 * - `closed`: autocannon from `BENCH_ISSUANCE_CONNECTIONS` (128) connections, as fast as each
 *   side answers. A variant that answers more slowly then also runs at a lower rate, with smaller
 *   batches and a higher CPU per credential for that reason alone: the ratio mixes the change's
 *   cost with the batching it loses.
 *
 * `BENCH_AB` chooses the two variants:
 * - `tracing` (default): A with tracing off, B exporting over OTLP/HTTP to a receiver in this
 *   process with `OTEL_TRACES_SAMPLER=parentbased_traceidratio` and `OTEL_TRACES_SAMPLER_ARG`
 *   `BENCH_AB_RATIO` (default 0.01): issue 21's cost of 1 % sampling. Any `OTEL_*` variable set
 *   for this script is B's too, over these (e.g. `OTEL_TRACES_SAMPLER=always_off`).
 * - `code`: A the checkout at `BENCH_AB_BASELINE` (its dependencies installed), B this one, both
 *   with tracing off: whether a change moved the hot path.
 *
 * The results go to `tests/bench/results/ab-latest.json` (not committed). Method and latest figures:
 * docs/performance.md.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ROOT } from '../support/processes.ts';
import { paced } from './paced.ts';
import {
  BENCH_PLANS,
  DATABASE_URL,
  load,
  type Profiled,
  profiled,
  startDistributedMode,
  startOtlpSink,
  type Target,
  type Variant,
} from './run.ts';

const PAIRS = Math.max(1, Number(process.env.BENCH_AB_PAIRS ?? 16));
const SLICE_SECONDS = Math.max(1, Number(process.env.BENCH_AB_SLICE_SECONDS ?? 4));
const STARTS = Math.max(1, Number(process.env.BENCH_AB_STARTS ?? 8));
const WARMUP_SECONDS = Math.max(1, Number(process.env.BENCH_AB_WARMUP_SECONDS ?? 10));
const CONNECTIONS = Number(process.env.BENCH_ISSUANCE_CONNECTIONS ?? 128);
const LOAD = process.env.BENCH_AB_LOAD ?? 'rate';
if (LOAD !== 'rate' && LOAD !== 'closed')
  throw new Error(`BENCH_AB_LOAD must be rate or closed, not ${LOAD}`);
const RATE_SHARE = Number(process.env.BENCH_AB_RATE_SHARE ?? 0.6);
if (!(RATE_SHARE > 0 && RATE_SHARE <= 1)) throw new Error('BENCH_AB_RATE_SHARE must be in (0, 1]');
/** A paced slice that delivers less than this share of its target rate fails the run. */
const RATE_TOLERANCE = 0.97;
const KIND = process.env.BENCH_AB ?? 'tracing';
const APPS = ['gateway', 'issuer', 'admin', 'billing'];

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** The four apps' CPU per credential in a slice, by app (process names `<label>-<app>[-<replica>]`). */
function appsCpu(slice: Profiled, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, us] of Object.entries(slice.cpu_us_per_request)) {
    const app = APPS.find((a) => name === `${label}-${a}` || name.startsWith(`${label}-${a}-`));
    if (app) out[app] = (out[app] ?? 0) + us;
  }
  return out;
}

const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

function commitOf(root: string): string {
  return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
}

async function main(): Promise<void> {
  const started = Date.now();
  let variants: [Variant, Variant];
  let sink: Awaited<ReturnType<typeof startOtlpSink>> | undefined;
  if (KIND === 'tracing') {
    sink = await startOtlpSink(false);
    variants = [
      // Off whatever OTEL_* this process has (run.ts hands those to every app it starts): an
      // exporter setting meant for B would otherwise turn tracing on in A, sampling everything.
      { label: 'ab-off', env: { OTEL_SDK_DISABLED: 'true' } },
      {
        label: 'ab-traced',
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
          OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
          OTEL_TRACES_SAMPLER_ARG: process.env.BENCH_AB_RATIO ?? '0.01',
          // Any OTEL_* variable of this process's (e.g. another sampler) for B, over the above.
          ...Object.fromEntries(
            Object.entries(process.env).filter(
              (e): e is [string, string] => e[0].startsWith('OTEL_') && e[1] !== undefined,
            ),
          ),
        },
      },
    ];
  } else if (KIND === 'code') {
    const baseline = process.env.BENCH_AB_BASELINE;
    if (!baseline)
      throw new Error('BENCH_AB=code needs BENCH_AB_BASELINE: a checkout with its dependencies installed');
    variants = [{ label: 'ab-baseline', root: baseline }, { label: 'ab-current' }];
  } else {
    throw new Error(`BENCH_AB must be tracing or code, not ${KIND}`);
  }
  const describe = (v: Variant) => {
    const tracing =
      v.env?.OTEL_SDK_DISABLED === 'true'
        ? ', tracing off'
        : v.env?.OTEL_TRACES_SAMPLER
          ? `, ${v.env.OTEL_TRACES_SAMPLER} ${v.env.OTEL_TRACES_SAMPLER_ARG ?? ''}`
          : '';
    const bsp = v.env?.OTEL_BSP_SCHEDULE_DELAY ? `, export every ${v.env.OTEL_BSP_SCHEDULE_DELAY} ms` : '';
    return `${v.label} (${commitOf(v.root ?? ROOT)}${tracing}${bsp})`;
  };
  console.log(
    `A/B ${KIND}: A = ${describe(variants[0])}, B = ${describe(variants[1])}; ${PAIRS} pairs of ${SLICE_SECONDS} s slices, ` +
      (LOAD === 'rate'
        ? `open-loop at ${RATE_SHARE} of the slower side's closed-loop rate (up to ${CONNECTIONS} connections)`
        : `closed-loop from ${CONNECTIONS} connections`),
  );

  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  const plansDir = mkdtempSync(join(tmpdir(), 'rp-bench-ab-'));
  const plansFile = join(plansDir, 'plans.yaml');
  writeFileSync(plansFile, BENCH_PLANS);
  let targets: Target[] = [];
  const pairs: { a: Profiled; b: Profiled; ratio: number; start: number; rate: number | undefined }[] = [];
  try {
    for (let start = 0; start < STARTS; start++) {
      // Fresh systems per start (one started first, then the other first): two systems of the
      // same code can differ by 20 % for as long as they run (A/A runs), so no one pair of
      // systems decides the comparison.
      const startOrder = start % 2 === 0 ? [0, 1] : [1, 0];
      for (const i of startOrder) {
        targets[i] = await startDistributedMode(
          'distributed',
          plansFile,
          admin,
          undefined,
          variants[i] as Variant,
        );
      }
      /** A slice on variant `i`: closed-loop without `rate`, else open-loop at `rate` per second. */
      const slice = (i: 0 | 1, seconds: number, rate?: number) => {
        const t = targets[i] as Target;
        const url = `${t.urls[0]}/api/v1/credentials`;
        return profiled(
          t.procs,
          () =>
            rate === undefined
              ? load(url, { ...t.issue, duration: seconds, connections: CONNECTIONS })
              : paced({ url, ...t.issue, rate, durationSeconds: seconds, connections: CONNECTIONS }),
          seconds,
          false,
        );
      };
      // Both variants' code optimized before anything counts: short runs measured the JIT's warm-up.
      console.log(`start ${start + 1} of ${STARTS}: warm-up (${WARMUP_SECONDS} s each, in two turns)…`);
      const warm: number[] = [];
      for (let w = 0; w < 2; w++) {
        warm[0] = (await slice(0, WARMUP_SECONDS / 2)).rps;
        warm[1] = (await slice(1, WARMUP_SECONDS / 2)).rps;
      }
      const rate =
        LOAD === 'rate'
          ? Math.max(1, Math.round(RATE_SHARE * Math.min(...(warm as [number, number]))))
          : undefined;
      if (rate !== undefined)
        console.log(`  closed-loop warm-up rates A ${warm[0]}/s, B ${warm[1]}/s: both measured at ${rate}/s`);
      const count = Math.ceil((PAIRS * (start + 1)) / STARTS) - Math.ceil((PAIRS * start) / STARTS);
      for (let k = 0; k < count; k++) {
        const p = pairs.length;
        const order: (0 | 1)[] = p % 2 === 0 ? [0, 1] : [1, 0];
        const got: Profiled[] = [];
        for (const i of order) got[i] = await slice(i, SLICE_SECONDS, rate);
        const [a, b] = got as [Profiled, Profiled];
        for (const s of [a, b]) {
          if (s.non2xx > 0 || s.errors > 0)
            throw new Error(`pair ${p + 1}: ${s.non2xx} non-2xx, ${s.errors} errors`);
          if (rate !== undefined && s.rps < RATE_TOLERANCE * rate)
            throw new Error(`pair ${p + 1}: ${s.rps}/s delivered of ${rate}/s: a side did not keep up`);
        }
        const ca = appsCpu(a, variants[0].label);
        const cb = appsCpu(b, variants[1].label);
        const ratio = sum(cb) / sum(ca);
        pairs.push({ a, b, ratio, start, rate });
        const p99 = (s: Profiled) => (rate === undefined ? '' : `, p99 ${s.p99} ms`);
        console.log(
          `  pair ${p + 1} (${order[0] === 0 ? 'A' : 'B'} first): A ${a.rps}/s${p99(a)}, apps ${sum(ca)} µs/credential ${JSON.stringify(ca)}; B ${b.rps}/s${p99(b)}, apps ${sum(cb)} µs ${JSON.stringify(cb)}; B/A ${ratio.toFixed(3)}`,
        );
      }
      for (const t of targets) await t?.stop();
      targets = [];
    }
    const ratios = pairs.map((p) => p.ratio);
    // Every slice's CPU over every slice's credentials: less moved by one odd pair than the median.
    const pooled = (side: 'a' | 'b', label: string) =>
      pairs.reduce((t, p) => t + sum(appsCpu(p[side], label)) * p[side].rps, 0) /
      pairs.reduce((t, p) => t + p[side].rps, 0);
    const summary = {
      ratio_pooled: +(pooled('b', variants[1].label) / pooled('a', variants[0].label)).toFixed(3),
      ratio_median: +median(ratios).toFixed(3),
      ratio_min: +Math.min(...ratios).toFixed(3),
      ratio_max: +Math.max(...ratios).toFixed(3),
      a: {
        rps_median: median(pairs.map((p) => p.a.rps)),
        apps_us_median: median(pairs.map((p) => sum(appsCpu(p.a, variants[0].label)))),
      },
      b: {
        rps_median: median(pairs.map((p) => p.b.rps)),
        apps_us_median: median(pairs.map((p) => sum(appsCpu(p.b, variants[1].label)))),
      },
    };
    console.log('');
    console.log(
      `apps' CPU per credential, B / A: ${summary.ratio_pooled} over all slices, median pair ${summary.ratio_median} (pairs ${summary.ratio_min}–${summary.ratio_max}); ` +
        `A ${summary.a.apps_us_median} µs at ${summary.a.rps_median}/s, B ${summary.b.apps_us_median} µs at ${summary.b.rps_median}/s (medians)`,
    );
    if (sink) console.log(`OTLP receiver: ${sink.requests} export request(s), ${sink.bytes} bytes`);
    console.log(`(run took ${Math.round((Date.now() - started) / 1000)} s)`);
    const dir = join(ROOT, 'tests', 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'ab-latest.json'),
      `${JSON.stringify(
        {
          date: new Date().toISOString(),
          kind: KIND,
          load:
            LOAD === 'rate'
              ? { kind: 'rate', share: RATE_SHARE }
              : { kind: 'closed', connections: CONNECTIONS },
          node: process.version,
          variants: variants.map((v) => ({ ...v, commit: commitOf(v.root ?? ROOT) })),
          pairs: pairs.map((p) => ({
            start: p.start + 1,
            ...(p.rate === undefined ? {} : { rate: p.rate }),
            a: p.a,
            b: p.b,
            ratio: +p.ratio.toFixed(4),
          })),
          summary,
          ...(sink ? { otlp: { exports: sink.requests, bytes: sink.bytes } } : {}),
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    for (const t of targets) await t?.stop().catch(() => {});
    await sink?.close();
    rmSync(plansDir, { recursive: true, force: true });
    await admin.end();
  }
}

await main();
