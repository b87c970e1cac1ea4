/** The UTC day a usage summary covers, as the SummarizeUsage contract writes it (YYYY-MM-DD). Pure. */

const DAY_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Start of the UTC day `day` (YYYY-MM-DD); undefined when `day` is not a real calendar day. */
export function parseDay(day: string): Date | undefined {
  const m = DAY_PATTERN.exec(day);
  if (!m) return undefined;
  const start = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  // Date.UTC rolls 2026-02-30 over to March: a round trip catches it.
  return start.toISOString().slice(0, 10) === day ? start : undefined;
}
