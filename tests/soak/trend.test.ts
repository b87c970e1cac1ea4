import { describe, expect, it } from 'vitest';
import { MIN_POINTS, type Point, slopeOf, steadyRise } from './trend.ts';

/** A point every 30 s from t = 120 s, as the soak samples after its warm-up. */
const series = (...values: number[]): Point[] => values.map((value, i) => ({ t: 120 + 30 * i, value }));
const RULE = { relative: 0.05, absolute: 4 };

describe('steadyRise', () => {
  it('flags a series that climbs in every step by more than the threshold', () => {
    const v = steadyRise(series(100, 102, 104, 106, 108, 110, 112), RULE);
    expect(v).toMatchObject({ judged: true, rising: true, risingSteps: 6, steps: 6 });
    // 2 per 30 s over 180 s; threshold max(5 % of the mean 106, 4).
    expect(v.projectedRise).toBeCloseTo(12);
    expect(v.threshold).toBeCloseTo(5.3);
  });

  it('passes a flat series with noise around its level', () => {
    expect(steadyRise(series(100, 103, 99, 102, 98, 101, 100), RULE)).toMatchObject({
      judged: true,
      rising: false,
    });
  });

  it('passes a warm-up climb that levels off: the steps stop rising', () => {
    // The fit still climbs (by more than the threshold), but only 3 of 8 steps go up.
    const v = steadyRise(series(100, 106, 110, 112, 112, 112, 112, 112, 112), RULE);
    expect(v.projectedRise).toBeGreaterThan(v.threshold);
    expect(v.risingSteps).toBe(3);
    expect(v.rising).toBe(false);
  });

  it('passes one jump: the fit climbs but one step of many goes up', () => {
    const v = steadyRise(series(100, 100, 100, 100, 130, 130, 130, 130), RULE);
    expect(v.projectedRise).toBeGreaterThan(v.threshold);
    expect(v.rising).toBe(false);
  });

  it('passes a steady climb too small to matter (under 5 % of the level)', () => {
    const v = steadyRise(series(1000, 1001, 1002, 1003, 1004, 1005), RULE);
    // Steps of 1 against a threshold of 50 over 5 steps: below the resolution (2.5), none rises.
    expect(v.risingSteps).toBe(0);
    expect(v.projectedRise).toBeCloseTo(5);
    expect(v.threshold).toBeCloseTo(50.125);
    expect(v.rising).toBe(false);
  });

  it('passes a steady climb under the absolute floor (one more connection, twice)', () => {
    const v = steadyRise(series(3, 3, 4, 4, 4, 5, 5), { relative: 0.05, absolute: 3 });
    expect(v.projectedRise).toBeLessThan(3);
    expect(v.rising).toBe(false);
  });

  it('flags a leak under sawtooth noise when most steps still go up', () => {
    // +3 per step with a dip every third sample (a collection just before the scrape).
    const v = steadyRise(series(100, 103, 106, 104, 107, 110, 108, 111, 114, 112, 115), RULE);
    expect(v.risingSteps).toBe(7);
    expect(v.rising).toBe(true);
  });

  it('passes a falling series', () => {
    expect(steadyRise(series(120, 118, 116, 114, 112, 110), RULE).rising).toBe(false);
  });

  it(`does not judge fewer than ${MIN_POINTS} points, however they climb`, () => {
    const v = steadyRise(series(100, 200, 300, 400), RULE);
    expect(v).toMatchObject({ judged: false, rising: false, risingSteps: 3 });
    expect(steadyRise(series(100, 200, 300, 400, 500), RULE)).toMatchObject({ judged: true, rising: true });
  });

  it('counts a tie as no rise', () => {
    expect(steadyRise(series(10, 20, 20, 20, 30), RULE).risingSteps).toBe(2);
  });

  // Billing's RSS (MiB) from the 2-minute mark of the 01:04 soak of 2026-11-26: a climb of
  // 10 MiB in three steps while its usage jobs first ran, then a plateau moving by kilobytes.
  // 13 of 16 steps (14 before rounding to 10 KiB) are increases, most of them by a few KiB.
  const BILLING_RSS = [
    132.17, 126.8, 127.12, 133.91, 135.5, 136.04, 136.06, 136.12, 136.76, 137.07, 137.08, 137.12, 137.14,
    137.54, 137.04, 137.04, 137.06,
  ];

  it('passes a plateau after a climb even when RSS moves up by kilobytes in most steps', () => {
    const v = steadyRise(series(...BILLING_RSS), { relative: 0.05, absolute: 4 });
    expect(v.projectedRise).toBeGreaterThan(v.threshold);
    expect(BILLING_RSS.slice(1).filter((x, i) => x > (BILLING_RSS[i] ?? 0)).length).toBe(13);
    // Above the resolution (threshold 6.8 / 16 steps / 4 ≈ 0.11 MiB) 7 do, under the 11 a
    // steady rise needs.
    expect(v.risingSteps).toBe(7);
    expect(v.rising).toBe(false);
  });

  it('flags a leak at the threshold rate that climbs unevenly, most steps by more than the resolution', () => {
    // 0.5 MiB per 30 s on average (8 MiB over 8 minutes, just over the 7.4 MiB threshold of a
    // ~148 MiB process), alternating +0.3 and +0.7.
    const values = Array.from({ length: 17 }, (_, i) => 144 + 0.5 * i + (i % 2 ? -0.2 : 0));
    const v = steadyRise(series(...values), { relative: 0.05, absolute: 4 });
    expect(v.risingSteps).toBe(16);
    expect(v.rising).toBe(true);
  });

  it('still counts every +1 of an integer series as a rise', () => {
    const v = steadyRise(series(20, 21, 22, 23, 24, 25, 26, 27, 28), { relative: 0.05, absolute: 5 });
    expect(v.risingSteps).toBe(8);
    expect(v.rising).toBe(true);
  });
});

describe('slopeOf', () => {
  it('is the least-squares slope per second', () => {
    expect(
      slopeOf([
        { t: 0, value: 1 },
        { t: 10, value: 3 },
        { t: 20, value: 2 },
        { t: 30, value: 4 },
      ]),
    ).toBeCloseTo(0.08);
  });

  it('is 0 for one point or one instant', () => {
    expect(slopeOf([{ t: 5, value: 9 }])).toBe(0);
    expect(
      slopeOf([
        { t: 5, value: 1 },
        { t: 5, value: 9 },
      ]),
    ).toBe(0);
  });
});
