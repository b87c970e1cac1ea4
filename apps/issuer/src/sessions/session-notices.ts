/**
 * The issuer's webhook notices (issue 34, docs/webhooks.md): facts about relay sessions and the
 * connection cap, written to the audit outbox (webhook-only, never in the trail) in the
 * transaction of the change, and delivered to admin with the audit events.
 *
 * - `session.started`, `session.ended`: one each per session, in the ledger's transaction.
 * - `session.refused`: counted per project and reason, written once per window (default a
 *   minute) per issuer replica with the counts: a refused connect changes nothing, and one
 *   event per refusal would let a misbehaving client flood its owner's endpoint.
 * - `cap.reached`: edge-triggered, at most once a minute per tenant across replicas
 *   (`cap_notices` decides, in the notice's transaction).
 */
import type { AuditRecorder, NoticeInput } from '@relayplane/shared/audit-outbox';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { type Kysely, sql } from 'kysely';
import type { IssuerDatabase } from '../db/schema.ts';
import type { RelaySessionRow, RelaySessionStore } from './session-store.ts';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function sessionStarted(row: RelaySessionRow): NoticeInput {
  return {
    type: 'session.started',
    tenantId: row.tenant_id,
    projectId: row.project_id,
    subject: { type: 'session', id: row.id },
    occurredAt: row.started_at,
    data: {
      session_id: row.id,
      relay_id: row.relay_id,
      api_key_id: row.api_key_id || null,
      credential_id: row.jti,
      role: row.role || null,
      path: row.path,
      transport: row.transport || null,
      started_at: iso(row.started_at),
    },
  };
}

export function sessionEnded(row: RelaySessionRow): NoticeInput {
  const reported = row.ended_by === 'relay' && row.duration_seconds !== null;
  return {
    type: 'session.ended',
    tenantId: row.tenant_id,
    projectId: row.project_id,
    subject: { type: 'session', id: row.id },
    occurredAt: row.ended_at ?? undefined,
    data: {
      session_id: row.id,
      relay_id: row.relay_id,
      reason: row.end_reason,
      ended_by: row.ended_by,
      started_at: iso(row.started_at),
      ended_at: iso(row.ended_at),
      duration_seconds: reported ? Number(row.duration_seconds) : null,
      bytes_sent: reported ? Number(row.bytes_sent) : null,
      bytes_received: reported ? Number(row.bytes_received) : null,
    },
  };
}

/** How often the cap notice may repeat per tenant. */
export const CAP_NOTICE_INTERVAL_MS = 60_000;

export interface NoticeDeps {
  db: Kysely<IssuerDatabase>;
  audit: AuditRecorder;
  clock: Clock;
  logger: Logger;
}

/** `cap.reached`, at most once a minute per tenant (a local memo spares the database under overload). */
export class CapNotices {
  readonly #d: NoticeDeps;
  readonly #lastTry = new Map<string, number>();

  constructor(deps: NoticeDeps) {
    this.#d = deps;
  }

  /** Never throws: a lost notice must not turn a refusal into an outage. */
  async reached(tenantId: string, limit: number, at: 'issuance' | 'connect'): Promise<void> {
    const now = this.#d.clock.now();
    const last = this.#lastTry.get(tenantId);
    if (last !== undefined && now.getTime() - last < CAP_NOTICE_INTERVAL_MS) return;
    this.#lastTry.set(tenantId, now.getTime());
    if (this.#lastTry.size > 100_000) this.#lastTry.clear();
    try {
      const written = await this.#d.db.transaction().execute(async (trx) => {
        const claimed = await trx
          .insertInto('cap_notices')
          .values({ tenant_id: tenantId, noticed_at: now })
          .onConflict((oc) =>
            oc
              .column('tenant_id')
              .doUpdateSet({ noticed_at: now })
              .where(
                'cap_notices.noticed_at',
                '<=',
                sql<Date>`${now}::timestamptz - make_interval(secs => ${CAP_NOTICE_INTERVAL_MS / 1000})`,
              ),
          )
          .returning('tenant_id')
          .executeTakeFirst();
        if (!claimed) return false;
        await this.#d.audit.notice(trx, {
          type: 'cap.reached',
          tenantId,
          projectId: null,
          subject: { type: 'tenant', id: tenantId },
          occurredAt: now,
          data: { limit: 'max_concurrent_connections', value: limit, at },
        });
        return true;
      });
      if (written) this.#d.audit.kick();
    } catch (err) {
      this.#d.logger.warn({ err, tenantId }, 'cap.reached notice not written');
    }
  }
}

/** Refusals per project and reason, written as one `session.refused` per project per window. */
export class RefusalTally {
  readonly #d: NoticeDeps;
  readonly #windowMs: number;
  #counts = new Map<string, { tenantId: string; projectId: string; reasons: Map<string, number> }>();
  #since: Date;
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;

  constructor(deps: NoticeDeps, windowMs: number) {
    this.#d = deps;
    this.#windowMs = windowMs;
    this.#since = deps.clock.now();
  }

  count(tenantId: string, projectId: string, reason: string): void {
    const key = `${tenantId}/${projectId}`;
    let entry = this.#counts.get(key);
    if (!entry) {
      entry = { tenantId, projectId, reasons: new Map() };
      this.#counts.set(key, entry);
    }
    entry.reasons.set(reason, (entry.reasons.get(reason) ?? 0) + 1);
  }

  start(): void {
    this.#timer = setInterval(() => void this.flush(), this.#windowMs);
    this.#timer.unref();
  }

  /** Writes the window's counts (one notice per project) and starts the next window. */
  flush(): Promise<void> {
    this.#flushing ??= this.#write().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  async #write(): Promise<void> {
    const counts = this.#counts;
    const since = this.#since;
    const until = this.#d.clock.now();
    this.#counts = new Map();
    this.#since = until;
    if (counts.size === 0) return;
    try {
      await this.#d.db.transaction().execute(async (trx) => {
        for (const { tenantId, projectId, reasons } of counts.values()) {
          const refusals = Object.fromEntries([...reasons].sort(([a], [b]) => a.localeCompare(b)));
          await this.#d.audit.notice(trx, {
            type: 'session.refused',
            tenantId,
            projectId,
            subject: { type: 'project', id: projectId },
            occurredAt: until,
            data: {
              window_start: since.toISOString(),
              window_end: until.toISOString(),
              refusals,
              total: [...reasons.values()].reduce((a, b) => a + b, 0),
            },
          });
        }
      });
      this.#d.audit.kick();
    } catch (err) {
      this.#d.logger.warn({ err, projects: counts.size }, 'session.refused notices not written');
    }
  }
}

export const SESSION_SWEEP_JOB = 'relay-session-sweep';
export const SESSION_SWEEP_INTERVAL_MS = 30_000;
/** A lapsed grant is ended this long after it lapsed (issuers' clocks may differ a little). */
const LAPSE_GRACE_MS = 5_000;
const SWEEP_BATCH = 500;

/**
 * Ends sessions whose grant lapsed without an end (their relay stopped revalidating), as
 * `expired` by `expiry`, each with its session.ended: so every started session ends.
 */
export class LapsedSessionSweep {
  readonly #d: { store: RelaySessionStore; audit: AuditRecorder; clock: Clock; logger: Logger };

  constructor(deps: { store: RelaySessionStore; audit: AuditRecorder; clock: Clock; logger: Logger }) {
    this.#d = deps;
  }

  async run(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.#d.store.endLapsed(this.#d.clock.now(), LAPSE_GRACE_MS, SWEEP_BATCH, (trx, row) =>
        this.#d.audit.notice(trx, sessionEnded(row)),
      );
      total += n;
      if (n < SWEEP_BATCH) break;
    }
    if (total > 0) {
      this.#d.audit.kick();
      this.#d.logger.info({ ended: total }, 'lapsed relay sessions ended');
    }
    return total;
  }
}
