/**
 * Which credentials retention may delete. Pure.
 *
 * Billing's usage job recomputes yesterday and today (UTC) from the credentials table, so a row
 * may go only once every day it counts in is over and past that recomputation: a credential
 * counts in the days from its issue to its expiry, so one that expired before the start of
 * yesterday counts in no day billing still asks for. The cutoff is the earlier of that instant
 * and `now - retentionDays`.
 */
import { DAY_MS } from '@relayplane/shared/usage-day';

/** Credentials that expired strictly before the returned instant may be deleted at `now`. */
export function retentionCutoff(now: Date, retentionDays: number): Date {
  const startOfYesterday = Math.floor(now.getTime() / DAY_MS) * DAY_MS - DAY_MS;
  return new Date(Math.min(now.getTime() - retentionDays * DAY_MS, startOfYesterday));
}
