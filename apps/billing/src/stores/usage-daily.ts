/**
 * The daily usage rows (`usage_daily`): a day's rows are only ever replaced as a whole, in one
 * transaction under a per-day advisory lock, never incremented. So two workers replacing the
 * same day take turns, and whatever ran last and completed is what is stored.
 */
import { type Kysely, sql } from 'kysely';
import type { BillingDatabase } from '../db/schema.ts';

export interface UsageDay {
  /** YYYY-MM-DD (UTC). */
  day: string;
  /** Empty: the whole tenant. */
  projectId: string;
  credentialsIssued: bigint;
  peakConcurrentConnections: number;
  sessionsEnded: bigint;
  sessionSeconds: number;
  bytesSent: bigint;
  bytesReceived: bigint;
}

/** One row of a day as the issuer summarized it. */
export interface UsageRow {
  tenantId: string;
  /** Empty: the whole tenant (its own peak, not the sum of its projects' peaks). */
  projectId: string;
  credentialsIssued: bigint;
  peakConcurrentConnections: number;
  /** Relay sessions that ended that day (absent from an issuer before sessions: 0). */
  sessionsEnded?: bigint;
  sessionSeconds?: number;
  bytesSent?: bigint;
  bytesReceived?: bigint;
}

// Transaction-scoped advisory lock per day: two workers replacing the same day take turns.
const USAGE_LOCK = sql`hashtext('relayplane.billing.usage-daily')`;
/** Rows per insert statement, under the bind-parameter limit. */
const INSERT_CHUNK = 5_000;

export class UsageStore {
  readonly #db: Kysely<BillingDatabase>;

  constructor(db: Kysely<BillingDatabase>) {
    this.#db = db;
  }

  /** Replaces every row of `day` with `rows`, computed from a snapshot taken at `computedAt`. */
  async replaceDay(day: string, rows: readonly UsageRow[], computedAt: Date): Promise<void> {
    const values = rows.map((r) => ({
      tenant_id: r.tenantId,
      project_id: r.projectId,
      day,
      credentials_issued: r.credentialsIssued.toString(),
      peak_concurrent_connections: r.peakConcurrentConnections,
      sessions_ended: (r.sessionsEnded ?? 0n).toString(),
      session_seconds: r.sessionSeconds ?? 0,
      bytes_sent: (r.bytesSent ?? 0n).toString(),
      bytes_received: (r.bytesReceived ?? 0n).toString(),
      computed_at: computedAt,
    }));
    await this.#db.transaction().execute(async (tx) => {
      await sql`select pg_advisory_xact_lock(${USAGE_LOCK}, hashtext(${day}))`.execute(tx);
      await tx.deleteFrom('usage_daily').where('day', '=', day).execute();
      // Bounded by tenants × projects active that day.
      for (let i = 0; i < values.length; i += INSERT_CHUNK) {
        await tx
          .insertInto('usage_daily')
          .values(values.slice(i, i + INSERT_CHUNK))
          .execute();
      }
    });
  }

  /** Stored usage of `tenantId` for the inclusive UTC days [from, to], by day then project ('' first). */
  async days(tenantId: string, from: string, to: string): Promise<UsageDay[]> {
    const rows = await this.#db
      .selectFrom('usage_daily')
      .select([
        sql<string>`to_char(day, 'YYYY-MM-DD')`.as('day'),
        'project_id',
        'credentials_issued',
        'peak_concurrent_connections',
        'sessions_ended',
        'session_seconds',
        'bytes_sent',
        'bytes_received',
      ])
      .where('tenant_id', '=', tenantId)
      .where('day', '>=', from)
      .where('day', '<=', to)
      .orderBy('usage_daily.day')
      .orderBy('project_id')
      .execute();
    return rows.map((r) => ({
      day: r.day,
      projectId: r.project_id,
      credentialsIssued: BigInt(r.credentials_issued),
      peakConcurrentConnections: Number(r.peak_concurrent_connections),
      sessionsEnded: BigInt(r.sessions_ended),
      sessionSeconds: Number(r.session_seconds),
      bytesSent: BigInt(r.bytes_sent),
      bytesReceived: BigInt(r.bytes_received),
    }));
  }
}
