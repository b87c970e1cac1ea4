/**
 * Usage of one UTC day, recomputed from the credentials and relay-session tables (the source of
 * truth): per tenant and project, and per tenant, the credentials issued that day, the peak number
 * of credentials live at the same instant, and the relay sessions that ended that day (their
 * count, seconds and bytes). A pure read: the billing usage job may ask for the
 * same day any number of times and always gets the same answer for a settled day.
 */
import { DAY_MS } from '@relayplane/shared/usage-day';
import { type Kysely, sql } from 'kysely';
import type { IssuerDatabase } from '../db/schema.ts';

export interface UsageSummaryRow {
  tenantId: string;
  /** Empty: the tenant's total (its own peak, not the sum of its projects' peaks). */
  projectId: string;
  credentialsIssued: bigint;
  peakConcurrentConnections: number;
  /** Relay sessions that ended this day: how many, seconds in all, bytes sent and received. */
  sessionsEnded: bigint;
  sessionSeconds: number;
  bytesSent: bigint;
  bytesReceived: bigint;
}

export class UsageSummaryStore {
  readonly #db: Kysely<IssuerDatabase>;

  constructor(db: Kysely<IssuerDatabase>) {
    this.#db = db;
  }

  /**
   * The rows of the UTC day that begins at `start`.
   *
   * A credential is live on [issued_at, least(expires_at, revoked_at)). The peak is a sweep
   * over +1 (start) / -1 (end) events clipped to the day; at one instant ends sort before
   * starts, so a credential ending at t and one starting at t never overlap. Credentials
   * issued before the day and still live at its start count from 00:00.
   */
  async summarize(start: Date): Promise<UsageSummaryRow[]> {
    const from = start.toISOString();
    const to = new Date(start.getTime() + DAY_MS).toISOString();
    // Every credential that overlaps the day or was issued in it (bounded by the
    // credentials_expires_at and credentials_issued_at indexes).
    const candidates = this.#db
      .selectFrom('credentials')
      .select([
        'tenant_id',
        'project_id',
        sql<boolean>`issued_at >= ${from}::timestamptz`.as('issued_in_day'),
        sql<Date>`greatest(issued_at, ${from}::timestamptz)`.as('live_from'),
        sql<Date>`least(expires_at, coalesce(revoked_at, expires_at), ${to}::timestamptz)`.as('live_to'),
      ])
      .where('issued_at', '<', sql<Date>`${to}::timestamptz`)
      .where('expires_at', '>', sql<Date>`${from}::timestamptz`);
    const result = await sql<{
      tenant_id: string;
      project_id: string;
      credentials_issued: string | number | bigint;
      peak: number;
    }>`
      with candidates as (${candidates}),
      spans as (
        select tenant_id, project_id, live_from, live_to from candidates where live_to > live_from
      ),
      events as (
        select tenant_id, project_id, live_from as at, 1 as delta from spans
        union all
        select tenant_id, project_id, live_to as at, -1 as delta from spans
      ),
      keyed as (
        select tenant_id, project_id, at, delta from events
        union all
        select tenant_id, '' as project_id, at, delta from events
      ),
      running as (
        select tenant_id, project_id,
          sum(delta) over (
            partition by tenant_id, project_id order by at, delta
            rows between unbounded preceding and current row
          ) as live
        from keyed
      ),
      peaks as (
        select tenant_id, project_id, max(live)::int as peak from running group by tenant_id, project_id
      ),
      counts as (
        select tenant_id, coalesce(project_id, '') as project_id,
          count(*) filter (where issued_in_day) as credentials_issued
        from candidates
        group by grouping sets ((tenant_id, project_id), (tenant_id))
      )
      select c.tenant_id, c.project_id, c.credentials_issued, coalesce(p.peak, 0)::int as peak
      from counts c
      left join peaks p on p.tenant_id = c.tenant_id and p.project_id = c.project_id
      order by c.tenant_id, c.project_id
    `.execute(this.#db);
    const rows = new Map<string, UsageSummaryRow>();
    const rowOf = (tenantId: string, projectId: string): UsageSummaryRow => {
      const key = `${tenantId}\u0000${projectId}`;
      let row = rows.get(key);
      if (!row) {
        row = {
          tenantId,
          projectId,
          credentialsIssued: 0n,
          peakConcurrentConnections: 0,
          sessionsEnded: 0n,
          sessionSeconds: 0,
          bytesSent: 0n,
          bytesReceived: 0n,
        };
        rows.set(key, row);
      }
      return row;
    };
    for (const r of result.rows) {
      const row = rowOf(r.tenant_id, r.project_id);
      row.credentialsIssued = BigInt(r.credentials_issued);
      row.peakConcurrentConnections = Number(r.peak);
    }
    for (const r of await this.#sessions(from, to)) {
      const row = rowOf(r.tenant_id, r.project_id);
      row.sessionsEnded = BigInt(r.sessions);
      row.sessionSeconds = Number(r.seconds);
      row.bytesSent = BigInt(r.bytes_sent);
      row.bytesReceived = BigInt(r.bytes_received);
    }
    return [...rows.values()].sort((a, b) =>
      a.tenantId === b.tenantId
        ? a.projectId < b.projectId
          ? -1
          : a.projectId > b.projectId
            ? 1
            : 0
        : a.tenantId < b.tenantId
          ? -1
          : 1,
    );
  }

  /**
   * Relay sessions that ended in [from, to), per tenant and project and per tenant: a session is
   * counted whole on the day it ended, with the duration its relay reported (or, ended by the
   * control plane and never reported, from its start to its end).
   */
  #sessions(from: string, to: string) {
    return this.#db
      .selectFrom('relay_sessions')
      .select([
        'tenant_id',
        sql<string>`coalesce(project_id, '')`.as('project_id'),
        sql<string | number | bigint>`count(*)`.as('sessions'),
        sql<
          string | number
        >`coalesce(sum(coalesce(duration_seconds, extract(epoch from ended_at - started_at))), 0)`.as(
          'seconds',
        ),
        sql<string | number | bigint>`coalesce(sum(bytes_sent), 0)`.as('bytes_sent'),
        sql<string | number | bigint>`coalesce(sum(bytes_received), 0)`.as('bytes_received'),
      ])
      .where('ended_at', '>=', sql<Date>`${from}::timestamptz`)
      .where('ended_at', '<', sql<Date>`${to}::timestamptz`)
      .groupBy(sql`grouping sets ((tenant_id, project_id), (tenant_id))`)
      .execute();
  }
}
