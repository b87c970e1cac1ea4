/**
 * The arithmetic of `pnpm bench`'s report: per-round ratios, medians over the rounds, and the
 * goals with their verdicts. Pure, so that what decides "met" is tested on its own
 * (report.test.ts); run.ts measures and prints.
 */

/** The modes `pnpm bench` can measure (BENCH_MODES, comma-separated, in this order by default). */
export const MODES = ['embedded', 'distributed', 'distributed-2x2'] as const;
export type Mode = (typeof MODES)[number];

export const MODE_LABELS: Record<Mode, string> = {
  embedded: 'embedded',
  distributed: 'distributed 1×1',
  'distributed-2x2': 'distributed 2×2',
};

/** BENCH_MODES: unset or empty means every mode; an unknown name fails the run before it starts. */
export function parseModes(value: string | undefined): Mode[] {
  const names = (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) return [...MODES];
  for (const name of names) {
    if (!(MODES as readonly string[]).includes(name))
      throw new Error(`BENCH_MODES: unknown mode "${name}" (known: ${MODES.join(', ')})`);
  }
  // Always in the canonical order, each once.
  return MODES.filter((m) => names.includes(m));
}

/** What one round of one mode measured: rates per second, the half-rate p99 in ms. */
export interface RoundFigures {
  /** Raw Ed25519 signatures per second on one core, in the same round. */
  sign: number;
  /** The peer's (node-oidc-provider) access tokens per second, in the same round. */
  peer: number;
  /** The mode's issuance rate. */
  issuance: number;
  hello?: number;
  jwks?: number;
  halfP99?: number;
}

/** The median of each figure over the rounds; each ratio is taken within its round first. */
export interface ModeSummary {
  rounds: number;
  issuance_rps: number;
  peer_rps: number;
  sign_per_s: number;
  issuance_ratio_to_peer: number;
  issuance_ratio_to_sign: number;
  peer_ratio_to_sign: number;
  hello_rps?: number;
  jwks_rps?: number;
  jwks_ratio_to_hello?: number;
  half_rate_p99_ms?: number;
}

/** The middle value; of an even count, the upper of the two middle ones (as run.ts always did). */
export function median(values: number[]): number {
  if (values.length === 0) throw new Error('median of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** a / b to three decimals; a baseline that measured nothing is a broken run, not a ratio. */
export function ratio(a: number, b: number): number {
  if (!(b > 0) || !Number.isFinite(a)) throw new Error(`no ratio of ${a} to ${b}`);
  return Math.round((a / b) * 1000) / 1000;
}

export function summarize(rounds: RoundFigures[]): ModeSummary {
  if (rounds.length === 0) throw new Error('no round measured');
  const summary: ModeSummary = {
    rounds: rounds.length,
    issuance_rps: median(rounds.map((r) => r.issuance)),
    peer_rps: median(rounds.map((r) => r.peer)),
    sign_per_s: median(rounds.map((r) => r.sign)),
    issuance_ratio_to_peer: median(rounds.map((r) => ratio(r.issuance, r.peer))),
    issuance_ratio_to_sign: median(rounds.map((r) => ratio(r.issuance, r.sign))),
    peer_ratio_to_sign: median(rounds.map((r) => ratio(r.peer, r.sign))),
  };
  const withJwks = rounds.filter(
    (r): r is RoundFigures & { hello: number; jwks: number } => r.hello !== undefined && r.jwks !== undefined,
  );
  if (withJwks.length > 0) {
    summary.hello_rps = median(withJwks.map((r) => r.hello));
    summary.jwks_rps = median(withJwks.map((r) => r.jwks));
    summary.jwks_ratio_to_hello = median(withJwks.map((r) => ratio(r.jwks, r.hello)));
  }
  const withHalf = rounds.flatMap((r) => (r.halfP99 === undefined ? [] : [r.halfP99]));
  if (withHalf.length > 0) summary.half_rate_p99_ms = median(withHalf);
  return summary;
}

export interface Goal {
  mode: Mode;
  /** What is compared, e.g. "issuance / peer". */
  what: string;
  /** Undefined: the run did not measure it (a missed goal, never a met one). */
  measured: number | undefined;
  op: '≥' | '<';
  target: number;
  unit: '×' | 'ms';
  /** Where the goal comes from. */
  source: string;
  met: boolean;
}

type GoalSpec = Omit<Goal, 'mode' | 'measured' | 'met'> & { figure: keyof ModeSummary };

const ISSUE_20 = 'issue 20';
const EARLIER = 'docs/performance.md';

/** The goals of each mode; distributed 2×2 has none of its own, its figures are printed for comparison. */
const GOALS: Record<Mode, GoalSpec[]> = {
  embedded: [
    {
      what: 'issuance / peer',
      figure: 'issuance_ratio_to_peer',
      op: '≥',
      target: 2,
      unit: '×',
      source: ISSUE_20,
    },
    {
      what: 'issuance / raw sign',
      figure: 'issuance_ratio_to_sign',
      op: '≥',
      target: 0.16,
      unit: '×',
      source: ISSUE_20,
    },
    {
      what: 'p99 at half the issuance rate',
      figure: 'half_rate_p99_ms',
      op: '<',
      target: 25,
      unit: 'ms',
      source: ISSUE_20,
    },
    {
      what: 'JWKS / hello-world',
      figure: 'jwks_ratio_to_hello',
      op: '≥',
      target: 0.9,
      unit: '×',
      source: ISSUE_20,
    },
  ],
  distributed: [
    {
      what: 'issuance / peer',
      figure: 'issuance_ratio_to_peer',
      op: '≥',
      target: 2,
      unit: '×',
      source: ISSUE_20,
    },
    {
      what: 'JWKS / hello-world',
      figure: 'jwks_ratio_to_hello',
      op: '≥',
      target: 0.9,
      unit: '×',
      source: ISSUE_20,
    },
    {
      what: 'issuance / raw sign',
      figure: 'issuance_ratio_to_sign',
      op: '≥',
      target: 0.25,
      unit: '×',
      source: EARLIER,
    },
    {
      what: 'p99 at half the issuance rate',
      figure: 'half_rate_p99_ms',
      op: '<',
      target: 25,
      unit: 'ms',
      source: EARLIER,
    },
  ],
  'distributed-2x2': [],
};

export function meets(measured: number | undefined, op: Goal['op'], target: number): boolean {
  if (measured === undefined || !Number.isFinite(measured)) return false;
  return op === '≥' ? measured >= target : measured < target;
}

/** Every goal of the measured modes, in MODES order, with its verdict. */
export function goals(summaries: Partial<Record<Mode, ModeSummary>>): Goal[] {
  const out: Goal[] = [];
  for (const mode of MODES) {
    const summary = summaries[mode];
    if (!summary) continue;
    for (const { figure, ...spec } of GOALS[mode]) {
      const measured = summary[figure];
      out.push({ mode, ...spec, measured, met: meets(measured, spec.op, spec.target) });
    }
  }
  return out;
}

export function formatMeasured(value: number | undefined, unit: Goal['unit']): string {
  if (value === undefined) return 'not measured';
  return unit === 'ms' ? `${value.toFixed(1)} ms` : `${value.toFixed(2)} ×`;
}

/** One line per goal: "embedded   issuance / peer   2.31 ×   goal ≥ 2 ×   met (issue 20)". */
export function formatGoal(g: Goal): string {
  const target = g.unit === 'ms' ? `${g.target} ms` : `${g.target} ×`;
  return `${MODE_LABELS[g.mode].padEnd(16)} ${g.what.padEnd(30)} ${formatMeasured(g.measured, g.unit).padStart(12)}   goal ${g.op} ${target.padEnd(7)} ${g.met ? 'met' : 'MISSED'} (${g.source})`;
}
