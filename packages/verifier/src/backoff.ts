/**
 * Exponential backoff with "equal jitter": half the delay is fixed, half random, so relays
 * restarted together spread out without ever retrying immediately.
 */
export function backoffDelayMs(
  attempt: number,
  initialMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return ceiling / 2 + random() * (ceiling / 2);
}
