import { type Kysely, type Selectable, sql } from 'kysely';
import type { AuditStep } from '../audit/trail.ts';
import type { AdminDatabase, AllowlistEntriesTable } from '../db/schema.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from './paging.ts';
import { type AllowlistEntryRecord, isForeignKeyViolation } from './records.ts';

export type CreateAllowlistOutcome = 'created' | 'duplicate' | 'limit_reached' | 'project_not_found';

const COLUMNS = ['id', 'tenant_id', 'project_id', 'cidr', 'created_at'] as const;

function toRecord(row: Selectable<AllowlistEntriesTable>): AllowlistEntryRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    cidr: row.cidr,
    createdAt: row.created_at,
  };
}

/** Rolls the insert back when it would pass the limit. */
class LimitReached extends Error {}

/** Project IP allowlists: normalised CIDR blocks, unique per project. */
export class AllowlistStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /**
   * Stores the entry unless the project already has it ('duplicate', by the unique index on
   * (project_id, cidr); the caller normalises) or already has `maxPerProject` entries
   * ('limit_reached'; a duplicate is reported as such even at the limit). Creations in one
   * project serialise on an advisory lock held until commit, so concurrent requests cannot
   * overshoot the limit. 'project_not_found' when the project is not (or no longer) in the tenant.
   */
  async create(
    entry: AllowlistEntryRecord,
    maxPerProject: number,
    audit: AuditStep<AllowlistEntryRecord>,
  ): Promise<CreateAllowlistOutcome> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`admin.allowlist_entries:${entry.projectId}`}))`.execute(
          trx,
        );
        const inserted = await trx
          .insertInto('allowlist_entries')
          .values({
            id: entry.id,
            tenant_id: entry.tenantId,
            project_id: entry.projectId,
            cidr: entry.cidr,
            created_at: entry.createdAt,
          })
          .onConflict((oc) => oc.constraint('allowlist_entries_project_id_cidr_key').doNothing())
          .returning('id')
          .executeTakeFirst();
        if (!inserted) return 'duplicate';
        const { count } = await trx
          .selectFrom('allowlist_entries')
          .select((eb) => eb.fn.countAll<string>().as('count'))
          .where('project_id', '=', entry.projectId)
          .executeTakeFirstOrThrow();
        if (Number(count) > maxPerProject) throw new LimitReached();
        await audit(trx, entry);
        return 'created';
      });
    } catch (err) {
      if (err instanceof LimitReached) return 'limit_reached';
      if (isForeignKeyViolation(err, 'allowlist_entries_project_fkey')) return 'project_not_found';
      throw err;
    }
  }

  /**
   * A page of the project's entries, oldest first; entries of the same instant by network (ids
   * are random; the network is unique in the project).
   */
  async list(tenantId: string, projectId: string, page: PageRequest): Promise<Page<AllowlistEntryRecord>> {
    let query = this.#db
      .selectFrom('allowlist_entries')
      .select(COLUMNS)
      .select(positionAt('created_at').as('position_at'))
      .where('project_id', '=', projectId)
      .where('tenant_id', '=', tenantId);
    if (page.after) query = query.where(after('created_at', 'cidr', 'asc', page.after));
    const rows = await query
      .orderBy('created_at', 'asc')
      .orderBy('cidr', 'asc')
      .limit(page.limit + 1)
      .execute();
    return toPage(rows, page, (r) => r.cidr, toRecord);
  }

  /** Deletes the entry; undefined when no such entry exists in that project and tenant. */
  async delete(
    tenantId: string,
    projectId: string,
    entryId: string,
    audit: AuditStep<AllowlistEntryRecord>,
  ): Promise<AllowlistEntryRecord | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .deleteFrom('allowlist_entries')
        .where('id', '=', entryId)
        .where('project_id', '=', projectId)
        .where('tenant_id', '=', tenantId)
        .returning(COLUMNS)
        .executeTakeFirst();
      if (!row) return undefined;
      const entry = toRecord(row);
      await audit(trx, entry);
      return entry;
    });
  }
}
