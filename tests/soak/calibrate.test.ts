import { describe, expect, it } from 'vitest';
import { type CpuReading, cpuBetween, fitScale, SCALE_BOUNDS, scaleRates } from './calibrate.ts';

const point = (scale: number, soakCores: number) => ({ scale, soakCores, machineBusy: 0 });

describe('fitScale', () => {
  it('finds where the line through the points reaches half the cores', () => {
    // 0.2 cores of flows + 2.4 cores per unit of the share rates: 1.0 core at (1.0 - 0.2) / 2.4.
    const c = fitScale([point(0.25, 0.8), point(0.5, 1.4)], 2);
    expect(c.targetCores).toBe(1);
    expect(c.fixedCores).toBeCloseTo(0.2);
    expect(c.coresPerScale).toBeCloseTo(2.4);
    expect(c.scale).toBeCloseTo(0.333, 3);
    expect(c.note).toBeUndefined();
  });

  it('aims at the given share of however many cores the machine has', () => {
    const c = fitScale([point(0.25, 0.8), point(0.5, 1.4)], 8);
    // 4 cores: (4 - 0.2) / 2.4.
    expect(c.scale).toBeCloseTo(1.583, 3);
    expect(fitScale([point(0.25, 0.8), point(0.5, 1.4)], 2, 0.25).scale).toBeCloseTo(0.125, 3);
  });

  it('fits the least-squares line through more than two points', () => {
    // On the line 0.1 + 2x, but for noise that cancels out.
    const c = fitScale([point(0.25, 0.65), point(0.5, 1.05), point(0.75, 1.65)], 2);
    expect(c.coresPerScale).toBeCloseTo(2);
    expect(c.fixedCores).toBeCloseTo(0.1, 1);
    expect(c.scale).toBeCloseTo(0.45, 1);
  });

  it('scales in proportion to the heaviest point when the line does not climb', () => {
    // Noise made the heavier point cheaper: no line to trust.
    const c = fitScale([point(0.25, 0.9), point(0.5, 0.8)], 2);
    expect(c.scale).toBeCloseTo(0.625, 3);
    expect(c.fixedCores).toBe(0);
    expect(c.coresPerScale).toBeCloseTo(1.6);
    expect(c.note).toMatch(/no climbing line/);
  });

  it('scales in proportion when the line would put the flows below zero', () => {
    const c = fitScale([point(0.25, 0.2), point(0.5, 0.9)], 2);
    expect(c.fixedCores).toBe(0);
    expect(c.scale).toBeCloseTo((0.5 * 1) / 0.9, 3);
  });

  it('clamps the fraction to its bounds and says so', () => {
    // The flows alone already take more than the target: the floor.
    const heavy = fitScale([point(0.25, 1.3), point(0.5, 1.5)], 2);
    expect(heavy.scale).toBe(SCALE_BOUNDS.min);
    expect(heavy.note).toMatch(/clamped to 0.05/);
    // A machine the streams barely load: the ceiling.
    const light = fitScale([point(0.25, 0.05), point(0.5, 0.1)], 2);
    expect(light.scale).toBe(SCALE_BOUNDS.max);
    expect(light.note).toMatch(/clamped to 2/);
  });

  it('needs a point', () => {
    expect(() => fitScale([], 2)).toThrow(/at least one point/);
  });
});

describe('scaleRates', () => {
  it('scales every rate, rounded, at least 1/s', () => {
    expect(scaleRates({ issuance: 2362, assignment: 188, jwks: 2 }, 0.3)).toEqual({
      issuance: 709,
      assignment: 56,
      jwks: 1,
    });
  });
});

describe('cpuBetween', () => {
  const reading = (o: Partial<CpuReading> & { at: number }): CpuReading => ({
    machine: { busy: 0, total: 0 },
    apps: 0,
    loadGenerator: 0,
    postgresBackends: new Map(),
    redis: 0,
    ...o,
  });

  it('counts the apps, the load generator, the PostgreSQL backends and Redis per second', () => {
    const a = reading({
      at: 0,
      machine: { busy: 100, total: 1000 },
      apps: 50,
      loadGenerator: 10,
      postgresBackends: new Map([
        [11, 5],
        [12, 7],
      ]),
      redis: 3,
    });
    const b = reading({
      at: 10_000,
      machine: { busy: 1300, total: 3000 },
      apps: 58,
      loadGenerator: 12,
      // Backend 12 went away; 13 started during the window and counts from 0.
      postgresBackends: new Map([
        [11, 6],
        [13, 0.5],
      ]),
      redis: 3.5,
    });
    expect(cpuBetween(a, b)).toEqual({
      appsAndLoadCores: 1,
      dependencyCores: 0.2,
      soakCores: 1.2,
      machineBusy: 0.6,
    });
  });
});
