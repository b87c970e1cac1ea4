/**
 * Audit retention: deletes events older than `RELAYPLANE_AUDIT_RETENTION_DAYS`, a prefix of
 * each chain at a time, keeping the anchor verification starts from (audit/trail.ts). Scheduled
 * on admin's bullmq queue (one replica runs it per period).
 */
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { AuditTrail } from '../audit/trail.ts';

export const AUDIT_PRUNE_JOB = 'audit-prune';
/** Hourly: a day's events go within the hour they pass the retention. */
export const AUDIT_PRUNE_INTERVAL_MS = 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

export async function pruneAuditEvents(deps: {
  audit: AuditTrail;
  clock: Clock;
  logger: Logger;
  retentionDays: number;
}): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - deps.retentionDays * DAY_MS);
  const deleted = await deps.audit.prune(cutoff);
  if (deleted > 0) deps.logger.info({ deleted, cutoff: cutoff.toISOString() }, 'audit events pruned');
  return deleted;
}
