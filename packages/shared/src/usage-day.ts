/**
 * The UTC day usage is counted by, written YYYY-MM-DD: billing asks the issuer for one day's
 * summary (SummarizeUsage), keeps daily rows and answers ranges of days. Pure.
 */

export const DAY_MS = 86_400_000;
const DAY_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Start of the UTC day `day`; undefined unless `day` is a real calendar day as YYYY-MM-DD. */
export function parseDay(day: string): Date | undefined {
  const m = DAY_PATTERN.exec(day);
  if (!m) return undefined;
  const start = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  // Date.UTC rolls 2026-02-30 over to March: the round trip catches it.
  return formatDay(start) === day ? start : undefined;
}

/** The UTC day `date` falls on. */
export function formatDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}
