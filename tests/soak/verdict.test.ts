import { describe, expect, it } from 'vitest';
import type { Sample } from './sample.ts';
import { judgeAnswers, judgeSamples } from './verdict.ts';

const MiB = 1024 * 1024;

/** Samples every 30 s from 0 with each value from `at(i)`; everything else flat. */
function samples(
  count: number,
  at: (i: number) => Partial<{ rssMiB: number; redisKeys: number; connections: number }> = () => ({}),
): Sample[] {
  return Array.from({ length: count }, (_, i) => {
    const v = { rssMiB: 100, redisKeys: 300, connections: 20, ...at(i) };
    const process = (name: string, rssMiB: number) => ({
      name,
      rssBytes: rssMiB * MiB,
      heapUsedBytes: 40 * MiB,
      heapTotalBytes: 60 * MiB,
      externalBytes: 10 * MiB,
      loopDelayP99Seconds: 0.012,
      activeHandles: 30,
      // The first sample ends no interval: no CPU figure.
      ...(i === 0 ? {} : { cpuCores: 0.3 }),
    });
    return {
      at: new Date(i * 30_000).toISOString(),
      elapsedSeconds: i * 30,
      processes: [process('gateway-0', v.rssMiB), process('admin', 90)],
      postgres: { connections: v.connections, byApplication: { 'relayplane-admin': v.connections } },
      redis: { usedMemoryBytes: 50 * MiB, keys: v.redisKeys },
      ...(i === 0 ? {} : { cpu: { machineBusy: 0.5, loadGeneratorCores: 0.2 } }),
      answersByStatus: { '201': 1000 * i },
    };
  });
}

describe('judgeSamples', () => {
  it('passes a 10-minute run whose every series is flat', () => {
    const v = judgeSamples(samples(21));
    expect(v.failures).toEqual([]);
    expect(v.notJudged).toEqual([]);
    expect(v.series.find((s) => s.name === 'admin CPU')?.points).toHaveLength(20);
    expect(v.series.map((s) => s.name)).toEqual([
      'gateway-0 RSS',
      'gateway-0 heap used',
      'gateway-0 heap total',
      'gateway-0 external',
      'gateway-0 loop delay p99',
      'gateway-0 handles',
      'gateway-0 CPU',
      'admin RSS',
      'admin heap used',
      'admin heap total',
      'admin external',
      'admin loop delay p99',
      'admin handles',
      'admin CPU',
      'PostgreSQL connections',
      'Redis used_memory',
      'Redis keys (soak prefix)',
    ]);
  });

  it('fails on RSS more than 10 % above the 2-minute sample at any later sample', () => {
    // 100 MiB at 2:00, one sample at 111 MiB (a jump, so no steady rise either).
    const v = judgeSamples(samples(21, (i) => ({ rssMiB: i === 12 ? 111 : 100 })));
    expect(v.failures).toEqual([
      'gateway-0 RSS grew 11.0 % after the first 2 minutes (100.0 MiB → 111.0 MiB; limit 10 %)',
    ]);
  });

  it('passes RSS growth during the warm-up and up to 10 % after it', () => {
    const v = judgeSamples(samples(21, (i) => ({ rssMiB: i < 4 ? 60 + 10 * i : i === 15 ? 109 : 100 })));
    expect(v.failures).toEqual([]);
  });

  it('fails on a steady rise of a system series after the warm-up, and names it', () => {
    // Redis keys: flat through the warm-up, then 40 more every 30 s.
    const v = judgeSamples(samples(21, (i) => ({ redisKeys: i <= 4 ? 300 : 300 + 40 * (i - 4) })));
    expect(v.failures).toHaveLength(1);
    expect(v.failures[0]).toMatch(
      /^Redis keys \(soak prefix\) rises steadily: the fitted line climbs 640 over the window \(threshold 100\), 16 of 16 steps up$/,
    );
  });

  it('ignores a climb that happens only during the warm-up', () => {
    const v = judgeSamples(samples(21, (i) => ({ connections: Math.min(20, 4 + 4 * i) })));
    expect(v.failures).toEqual([]);
  });

  it('says what a 3-minute run cannot judge: trends; RSS growth still is', () => {
    const flat = judgeSamples(samples(7));
    expect(flat.failures).toEqual([]);
    expect(flat.notJudged).toEqual([
      'trends: 3 sample(s) from the 2-minute mark on; a trend needs 5 (a run of at least 4 minutes)',
    ]);
    const grown = judgeSamples(samples(7, (i) => ({ rssMiB: 100 + (i >= 6 ? 20 : 0) })));
    expect(grown.failures).toEqual([
      'gateway-0 RSS grew 20.0 % after the first 2 minutes (100.0 MiB → 120.0 MiB; limit 10 %)',
    ]);
  });

  it('says RSS growth is not judged when the run ended before 2 minutes', () => {
    const v = judgeSamples(samples(4));
    expect(v.failures).toEqual([]);
    expect(v.notJudged).toContain('gateway-0 RSS growth: no sample after the 2-minute mark');
  });
});

describe('judgeAnswers', () => {
  const answer = (status: string, count: number, route = '/api/v1/credentials') => ({
    method: 'POST',
    route,
    status,
    count,
  });

  it('passes 2xx and 503', () => {
    expect(judgeAnswers([answer('201', 90_000), answer('503', 12), answer('204', 5)])).toEqual([]);
  });

  it('fails on any other 5xx, naming the route', () => {
    expect(
      judgeAnswers([answer('201', 10), answer('500', 1), answer('502', 2, '/admin/v1/projects')]),
    ).toEqual([
      '1 × 500 on POST /api/v1/credentials: no 5xx but 503 is allowed',
      '2 × 502 on POST /admin/v1/projects: no 5xx but 503 is allowed',
    ]);
  });

  it('fails on a 4xx: the mix sends only valid requests', () => {
    expect(judgeAnswers([answer('429', 3, '/admin/v1/auth/login')])).toEqual([
      '3 × 429 on POST /admin/v1/auth/login: every request of the mix is valid, so the mix broke',
    ]);
  });
});
