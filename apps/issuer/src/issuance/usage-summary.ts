/**
 * Usage of one UTC day, recomputed from the credentials table (the source of truth): per
 * tenant and project, and per tenant, the credentials issued that day and the peak number of
 * credentials live at the same instant. A pure read: the billing usage job may ask for the
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
    return result.rows.map((r) => ({
      tenantId: r.tenant_id,
      projectId: r.project_id,
      credentialsIssued: BigInt(r.credentials_issued),
      peakConcurrentConnections: Number(r.peak),
    }));
  }
}
