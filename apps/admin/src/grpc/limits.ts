import { AppError } from '@relayplane/shared/errors';
import type { RateLimiter } from '@relayplane/shared/rate-limit';

export interface Limit {
  /** From ../redis/keys.ts. */
  key: string;
  max: number;
}

/**
 * Counts one hit on every limit; over any of them answers `rate_limited` with the seconds left
 * in the longest-running window.
 */
export async function enforceLimits(throttle: RateLimiter, limits: Limit[], message: string): Promise<void> {
  const hits = await Promise.all(limits.map((l) => throttle.hit(l.key)));
  let retryAfterMs = 0;
  hits.forEach((hit, i) => {
    const limit = limits[i];
    if (limit && hit.count > limit.max) retryAfterMs = Math.max(retryAfterMs, hit.resetInMs);
  });
  if (retryAfterMs > 0) {
    throw new AppError('rate_limited', message, {
      retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
    });
  }
}
