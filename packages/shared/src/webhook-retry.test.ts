import { describe, expect, it } from 'vitest';
import { DEFAULT_WEBHOOK_RETRY_SCHEDULE, parseRetrySchedule, retryDelayMs } from './webhook-retry.ts';

describe('webhook retry schedule', () => {
  it('spans more than 24 hours by default, in 8 attempts', () => {
    const total = DEFAULT_WEBHOOK_RETRY_SCHEDULE.reduce((a, b) => a + b, 0);
    expect(total).toBeGreaterThan(24 * 3600);
    expect(DEFAULT_WEBHOOK_RETRY_SCHEDULE).toHaveLength(7);
  });

  it('waits each delay with up to 20 % jitter either way, then gives up', () => {
    expect(retryDelayMs(1, [5], () => 0.5)).toBe(5_000);
    expect(retryDelayMs(1, [5], () => 0)).toBe(4_000);
    expect(retryDelayMs(1, [5], () => 0.999_999)).toBe(6_000);
    expect(retryDelayMs(2, [5, 300], () => 0.5)).toBe(300_000);
    expect(retryDelayMs(3, [5, 300])).toBeUndefined();
  });

  it('reads RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE as comma-separated seconds', () => {
    expect(parseRetrySchedule('1, 2,0.5')).toEqual({ ok: true, schedule: [1, 2, 0.5] });
    for (const bad of ['', '1,,2', 'a,b', '0', '-1', '700000', Array(33).fill('1').join(',')])
      expect(parseRetrySchedule(bad), bad).toMatchObject({ ok: false });
  });
});
