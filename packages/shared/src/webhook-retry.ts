/**
 * When a webhook delivery is attempted again (issue 34): after a non-2xx answer or a timeout,
 * on a schedule of delays, each with jitter, spanning more than 24 hours by default — the
 * schedule Standard Webhooks senders use: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
 * 10 h (about 27.6 h in all, 8 attempts). `RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE` (comma-separated
 * seconds) replaces the delays after the first attempt, so tests can shorten it.
 */

/** Seconds before each retry; the first attempt is at once. */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE: readonly number[] = [
  5, 300, 1_800, 7_200, 18_000, 36_000, 36_000,
];

/** Each delay moves by up to this share either way, so retries of many messages do not arrive together. */
export const RETRY_JITTER = 0.2;

/** The schedule a RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE value describes, or why it is none. */
export function parseRetrySchedule(
  value: string,
): { ok: true; schedule: number[] } | { ok: false; message: string } {
  const parts = value.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.length > 32 || parts.some((p) => !/^\d+(\.\d+)?$/.test(p))) {
    return { ok: false, message: 'must be 1 to 32 comma-separated delays in seconds, e.g. 5,300,1800' };
  }
  const schedule = parts.map(Number);
  if (schedule.some((s) => s <= 0 || s > 7 * 86_400))
    return { ok: false, message: 'each delay must be more than 0 and at most 604800 seconds (7 days)' };
  return { ok: true, schedule };
}

/**
 * The delay before attempt `attempt + 1` after attempt `attempt` (1-based) failed, in ms, or
 * undefined when the schedule is spent (the delivery has failed for good). `random` is in [0, 1).
 */
export function retryDelayMs(
  attempt: number,
  schedule: readonly number[] = DEFAULT_WEBHOOK_RETRY_SCHEDULE,
  random: () => number = Math.random,
): number | undefined {
  const base = schedule[attempt - 1];
  if (base === undefined) return undefined;
  const jitter = 1 + RETRY_JITTER * (2 * random() - 1);
  return Math.round(base * 1000 * jitter);
}
