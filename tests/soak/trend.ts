/**
 * When a sampled series (RSS, heap, event-loop delay, handles, connections, Redis memory)
 * counts as rising steadily over a soak.
 *
 * A leak shows as a level that keeps climbing; noise as wobble around a level, and warm-up
 * (JIT, caches and pools filling, the first credentials' slots) as a climb that stops, which
 * is why only the samples after the warm-up are judged. Over those, a series rises steadily
 * when both hold:
 *
 * - **the fitted line climbs by enough**: the least-squares slope times the judged span (the
 *   rise the line projects over the window) is at least `max(relative × mean level, absolute)`.
 *   The fit looks at every point at once, so one noisy sample moves it little; the relative
 *   part scales with the series, the absolute floor keeps small integers (3 → 4 connections)
 *   and sub-millisecond delays from counting as growth.
 * - **most steps go up**: at least two thirds of consecutive pairs rise (a tie is not a rise).
 *   The fit alone would call one jump a trend (a cache filled once, a collection that ran just
 *   after one sample): a leak climbs in most intervals, a jump in one. A step rises when it
 *   climbs by more than a quarter of the average step the threshold stands for
 *   (`threshold / steps / STEP_RESOLUTION`): RSS almost never stays put to the kilobyte (a few
 *   pages touched, a thread stack grown), so with "any increase" a plateau after a climb
 *   still counted 14 of 16 steps up (billing at 136.1 → 136.8 → 137.07 → 137.08 → 137.12 →
 *   137.14 → 137.54 → 137.04 MiB). A leak at the threshold's rate climbs by four times that in an
 *   average step, so it still counts; for integer series (handles, connections) every +1
 *   still counts.
 *
 * Fewer than MIN_POINTS points (two minutes at one sample every 30 s) are not judged: a line
 * through three or four noisy points says little, and a run that short is left to the RSS
 * growth rule (verdict.ts). The step test is weak on its own in short windows (with 5
 * points, 3 rising steps of 4 happen to pure noise about one time in five), which is why both
 * tests must hold; at 17 points (10 minutes), 11 rising steps of 16 happen to noise about one
 * time in sixty.
 */

export interface Point {
  /** Seconds since the load started. */
  t: number;
  value: number;
}

export interface RiseRule {
  /** The rise must reach this share of the series' mean level… */
  relative: number;
  /** …and at least this much, in the series' own unit. */
  absolute: number;
}

export interface RiseVerdict {
  /** False when there were too few points to judge (then `rising` is false). */
  judged: boolean;
  rising: boolean;
  /** Least-squares slope, in the series' unit per second. */
  slope: number;
  /** slope × (last t − first t): what the fitted line rises over the window. */
  projectedRise: number;
  /** The rise that counts: max(relative × mean, absolute). */
  threshold: number;
  /** Consecutive pairs whose second value is higher than the first by more than the resolution. */
  risingSteps: number;
  steps: number;
}

export const MIN_POINTS = 5;
/** Share of consecutive pairs that must rise. */
export const RISING_SHARE = 2 / 3;
/** A step rises when it climbs by more than 1/STEP_RESOLUTION of the threshold's average step. */
export const STEP_RESOLUTION = 4;

/** Least-squares slope of value over t (0 for fewer than two distinct times). */
export function slopeOf(points: readonly Point[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const meanT = points.reduce((sum, p) => sum + p.t, 0) / n;
  const meanV = points.reduce((sum, p) => sum + p.value, 0) / n;
  let covariance = 0;
  let variance = 0;
  for (const p of points) {
    covariance += (p.t - meanT) * (p.value - meanV);
    variance += (p.t - meanT) ** 2;
  }
  return variance === 0 ? 0 : covariance / variance;
}

export function steadyRise(points: readonly Point[], rule: RiseRule): RiseVerdict {
  const steps = Math.max(0, points.length - 1);
  const slope = slopeOf(points);
  const span = points.length ? (points.at(-1)?.t ?? 0) - (points[0]?.t ?? 0) : 0;
  const projectedRise = slope * span;
  const mean = points.length ? points.reduce((sum, p) => sum + p.value, 0) / points.length : 0;
  const threshold = Math.max(rule.relative * Math.abs(mean), rule.absolute);
  const minStep = steps ? threshold / steps / STEP_RESOLUTION : 0;
  let risingSteps = 0;
  for (let i = 1; i < points.length; i++) {
    if ((points[i]?.value ?? 0) - (points[i - 1]?.value ?? 0) > minStep) risingSteps++;
  }
  const judged = points.length >= MIN_POINTS;
  const rising =
    judged && slope > 0 && projectedRise >= threshold && risingSteps >= Math.ceil(RISING_SHARE * steps);
  return { judged, rising, slope, projectedRise, threshold, risingSteps, steps };
}
