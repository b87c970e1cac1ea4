/** The UTC days usage is counted by (YYYY-MM-DD), and the ranges GetUsage answers. Pure. */
import { AppError } from '@relayplane/contract/errors';
import { DAY_MS, parseDay } from '@relayplane/shared/usage-day';

/** Longest range GetUsage answers, in days (inclusive of both ends: a leap year). */
const MAX_USAGE_QUERY_DAYS = 366;

/** Start of the UTC day `day`, or an `invalid_request` naming the field `name`. */
export function requireDay(name: string, day: string): Date {
  const start = parseDay(day);
  if (!start) throw new AppError('invalid_request', `${name} must be a calendar day as YYYY-MM-DD`);
  return start;
}

/** Checks the inclusive range of days [from, to] a usage query asks for. */
export function requireUsageRange(from: string, to: string): void {
  const start = requireDay('from', from);
  const end = requireDay('to', to);
  if (end < start) throw new AppError('invalid_request', 'from must not be after to');
  if ((end.getTime() - start.getTime()) / DAY_MS + 1 > MAX_USAGE_QUERY_DAYS) {
    throw new AppError('invalid_request', `a usage range spans at most ${MAX_USAGE_QUERY_DAYS} days`);
  }
}
