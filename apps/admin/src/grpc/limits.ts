import { AppError } from '@relayplane/contract/errors';
import { throttleClient } from '@relayplane/shared/client-address';
import type { RateLimiter } from '@relayplane/shared/rate-limit';

export interface Limit {
  /** From ../redis/keys.ts. */
  key: string;
  max: number;
}

/**
 * The client a per-client-IP throttle key counts: the IP, an IPv6 address by its network of
 * `RELAYPLANE_THROTTLE_IPV6_PREFIX` bits (one /64 is one client). Every per-IP key goes through it.
 */
export function throttleClientOf(deps: { throttleIpv6Prefix: number }, ip: string): string {
  return throttleClient(ip.trim(), deps.throttleIpv6Prefix);
}

/** A limit the counted attempt went over, and when its window ends. */
export interface Exceeded<L extends Limit = Limit> {
  limit: L;
  resetInMs: number;
}

/**
 * Counts one hit on every limit; over any of them answers `rate_limited` with the seconds left
 * in the longest-running window. `onExceeded` (given the limits gone over, in `limits`' order)
 * runs before that answer, e.g. to record the refusal.
 */
export async function enforceLimits<L extends Limit>(
  throttle: RateLimiter,
  limits: L[],
  message: string,
  onExceeded?: (exceeded: Exceeded<L>[]) => Promise<void>,
): Promise<void> {
  const hits = await Promise.all(limits.map((l) => throttle.hit(l.key)));
  const exceeded: Exceeded<L>[] = [];
  hits.forEach((hit, i) => {
    const limit = limits[i];
    if (limit && hit.count > limit.max) exceeded.push({ limit, resetInMs: hit.resetInMs });
  });
  if (exceeded.length === 0) return;
  if (onExceeded) await onExceeded(exceeded);
  const retryAfterMs = Math.max(...exceeded.map((e) => e.resetInMs));
  throw new AppError('rate_limited', message, {
    retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
  });
}
