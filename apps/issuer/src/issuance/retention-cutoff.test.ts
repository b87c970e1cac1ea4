import { describe, expect, it } from 'vitest';
import { retentionCutoff } from './retention-cutoff.ts';

describe('retentionCutoff', () => {
  it('keeps credentials for the retention window after their expiry', () => {
    expect(retentionCutoff(new Date('2026-03-20T12:34:56Z'), 35).toISOString()).toBe(
      '2026-02-13T12:34:56.000Z',
    );
    expect(retentionCutoff(new Date('2026-03-20T12:34:56Z'), 2).toISOString()).toBe(
      '2026-03-18T12:34:56.000Z',
    );
  });

  it('never reaches into yesterday or today, the days billing still recomputes', () => {
    // A window shorter than the config allows still stops at the start of yesterday (UTC).
    expect(retentionCutoff(new Date('2026-03-20T12:34:56Z'), 1).toISOString()).toBe(
      '2026-03-19T00:00:00.000Z',
    );
    expect(retentionCutoff(new Date('2026-03-20T00:00:00Z'), 0).toISOString()).toBe(
      '2026-03-19T00:00:00.000Z',
    );
  });
});
