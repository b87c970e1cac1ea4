import { describe, expect, it } from 'vitest';
import {
  formatGoal,
  goals,
  MODES,
  type ModeSummary,
  median,
  meets,
  parseModes,
  type RoundFigures,
  ratio,
  summarize,
} from './report.ts';

describe('parseModes (BENCH_MODES)', () => {
  it('means every mode when unset or empty', () => {
    expect(parseModes(undefined)).toEqual([...MODES]);
    expect(parseModes(' , ')).toEqual([...MODES]);
  });

  it('keeps the canonical order and each mode once', () => {
    expect(parseModes('distributed-2x2, embedded,embedded')).toEqual(['embedded', 'distributed-2x2']);
  });

  it('fails on an unknown mode, naming it', () => {
    expect(() => parseModes('embedded,distributed-3x3')).toThrow('unknown mode "distributed-3x3"');
  });
});

describe('median and ratio', () => {
  it('takes the middle value, of an even count the upper middle one, whatever the order', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(3);
    expect(() => median([])).toThrow();
  });

  it('rounds ratios to three decimals and refuses a baseline that measured nothing', () => {
    expect(ratio(2_000, 3_000)).toBe(0.667);
    expect(() => ratio(1_000, 0)).toThrow('no ratio');
    expect(() => ratio(Number.NaN, 10)).toThrow('no ratio');
  });
});

describe('summarize', () => {
  const rounds: RoundFigures[] = [
    { sign: 20_000, peer: 2_000, issuance: 4_000, hello: 30_000, jwks: 27_000, halfP99: 30 },
    // A slow round: everything at half speed keeps its ratios.
    { sign: 10_000, peer: 1_000, issuance: 2_600, hello: 15_000, jwks: 15_000, halfP99: 20 },
    { sign: 20_000, peer: 2_500, issuance: 4_500, hello: 30_000, jwks: 28_500, halfP99: 24 },
  ];

  it('takes each ratio within its round, then the median over the rounds', () => {
    const s = summarize(rounds);
    // Per round: 2.0, 2.6, 1.8 → 2.0 (a ratio of the medians would be 4000/2000 = 2.0 too,
    // but the sign ratios differ: per round 0.2, 0.26, 0.225 → 0.225, not 4000/20000 = 0.2).
    expect(s.issuance_ratio_to_peer).toBe(2);
    expect(s.issuance_ratio_to_sign).toBe(0.225);
    expect(s.peer_ratio_to_sign).toBe(0.1);
    expect(s.jwks_ratio_to_hello).toBe(0.95);
    expect(s.half_rate_p99_ms).toBe(24);
    expect(s).toMatchObject({ rounds: 3, issuance_rps: 4_000, peer_rps: 2_000, sign_per_s: 20_000 });
  });

  it('leaves out what the mode did not measure', () => {
    const s = summarize([{ sign: 20_000, peer: 2_000, issuance: 5_000 }]);
    expect(s.jwks_ratio_to_hello).toBeUndefined();
    expect(s.half_rate_p99_ms).toBeUndefined();
    expect(s.issuance_ratio_to_peer).toBe(2.5);
  });
});

describe('goals', () => {
  const summary = (over: Partial<ModeSummary>): ModeSummary => ({
    rounds: 3,
    issuance_rps: 4_000,
    peer_rps: 2_000,
    sign_per_s: 20_000,
    issuance_ratio_to_peer: 2,
    issuance_ratio_to_sign: 0.2,
    peer_ratio_to_sign: 0.1,
    jwks_ratio_to_hello: 0.9,
    half_rate_p99_ms: 24.9,
    ...over,
  });

  it("gives embedded the issue's four goals, met exactly at the bounds", () => {
    const list = goals({ embedded: summary({}) });
    expect(list.map((g) => [g.what, g.op, g.target, g.met])).toEqual([
      ['issuance / peer', '≥', 2, true],
      ['issuance / raw sign', '≥', 0.16, true],
      ['p99 at half the issuance rate', '<', 25, true],
      ['JWKS / hello-world', '≥', 0.9, true],
    ]);
  });

  it('misses each goal just past its bound; a p99 of exactly 25 ms misses', () => {
    const list = goals({
      embedded: summary({
        issuance_ratio_to_peer: 1.999,
        issuance_ratio_to_sign: 0.159,
        half_rate_p99_ms: 25,
        jwks_ratio_to_hello: 0.899,
      }),
    });
    expect(list.every((g) => g.mode === 'embedded' && !g.met)).toBe(true);
    expect(list).toHaveLength(4);
  });

  it('gives distributed 1×1 the 2 × peer and JWKS goals and keeps the earlier ones; 2×2 has none', () => {
    const list = goals({
      distributed: summary({ issuance_ratio_to_sign: 0.26, half_rate_p99_ms: 30 }),
      'distributed-2x2': summary({}),
    });
    expect(list.map((g) => [g.mode, g.what, g.target, g.source, g.met])).toEqual([
      ['distributed', 'issuance / peer', 2, 'issue 20', true],
      ['distributed', 'JWKS / hello-world', 0.9, 'issue 20', true],
      ['distributed', 'issuance / raw sign', 0.25, 'docs/performance.md', true],
      ['distributed', 'p99 at half the issuance rate', 25, 'docs/performance.md', false],
    ]);
  });

  it('counts a figure the run did not measure as missed, never met', () => {
    const [, , p99] = goals({ embedded: summary({ half_rate_p99_ms: undefined }) });
    expect(p99).toMatchObject({ what: 'p99 at half the issuance rate', measured: undefined, met: false });
    expect(formatGoal(p99 as NonNullable<typeof p99>)).toContain('not measured');
    expect(meets(Number.NaN, '<', 25)).toBe(false);
  });

  it('prints the measured figure, the goal and the verdict', () => {
    const [first, , p99] = goals({ embedded: summary({ issuance_ratio_to_peer: 1.5 }) });
    expect(formatGoal(first as NonNullable<typeof first>)).toMatch(
      /embedded\s+issuance \/ peer\s+1\.50 ×\s+goal ≥ 2 ×\s+MISSED \(issue 20\)/,
    );
    expect(formatGoal(p99 as NonNullable<typeof p99>)).toMatch(/24\.9 ms\s+goal < 25 ms\s+met/);
  });
});
