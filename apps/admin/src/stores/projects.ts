import { type Kysely, sql } from 'kysely';
import type { AuditStep } from '../audit/trail.ts';
import type { AdminDatabase } from '../db/schema.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from './paging.ts';
import { isUniqueViolation, type ProjectRecord } from './records.ts';

export class ProjectStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /**
   * Creates the project unless the tenant already has `maxProjects` of them ('limit_reached')
   * or one of that name ('name_taken', decided by the unique index). Creations in one tenant
   * serialise on an advisory lock, so concurrent requests cannot overshoot the limit. `audit`
   * records the creation in the same transaction.
   */
  async create(
    project: ProjectRecord,
    maxProjects: number,
    audit: AuditStep<ProjectRecord>,
  ): Promise<'created' | 'name_taken' | 'limit_reached'> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`admin.projects:${project.tenantId}`}))`.execute(
          trx,
        );
        const { count, taken } = await trx
          .selectFrom('projects')
          .select((eb) => [
            eb.fn.countAll<string>().as('count'),
            eb.fn.count<string>('id').filterWhere('name', '=', project.name).as('taken'),
          ])
          .where('tenant_id', '=', project.tenantId)
          .executeTakeFirstOrThrow();
        // A duplicate name is a conflict whatever the plan says; only a new name counts against the limit.
        if (Number(taken) > 0) return 'name_taken';
        if (Number(count) >= maxProjects) return 'limit_reached';
        await trx
          .insertInto('projects')
          .values({
            id: project.id,
            tenant_id: project.tenantId,
            name: project.name,
            environment: project.environment,
            created_at: project.createdAt,
          })
          .execute();
        await audit(trx, project);
        return 'created';
      });
    } catch (err) {
      if (isUniqueViolation(err, 'projects_tenant_id_name_key')) return 'name_taken';
      throw err;
    }
  }

  /** The project with this id in this tenant; undefined as well when it belongs to another tenant. */
  async find(tenantId: string, id: string): Promise<ProjectRecord | undefined> {
    const row = await this.#db
      .selectFrom('projects')
      .select(['id', 'tenant_id', 'name', 'environment', 'created_at'])
      .where('id', '=', id)
      .where('tenant_id', '=', tenantId)
      .executeTakeFirst();
    return (
      row && {
        id: row.id,
        tenantId: row.tenant_id,
        name: row.name,
        environment: row.environment,
        createdAt: row.created_at,
      }
    );
  }

  /**
   * A page of the tenant's projects, oldest first (then by id); `onlyId` keeps that project only
   * (what a bot or an identity token may see).
   */
  async list(tenantId: string, page: PageRequest, onlyId?: string): Promise<Page<ProjectRecord>> {
    let query = this.#db
      .selectFrom('projects')
      .select(['id', 'tenant_id', 'name', 'environment', 'created_at'])
      .select(positionAt('created_at').as('position_at'))
      .where('tenant_id', '=', tenantId);
    if (onlyId !== undefined) query = query.where('id', '=', onlyId);
    if (page.after) query = query.where(after('created_at', 'id', 'asc', page.after));
    const rows = await query
      .orderBy('created_at')
      .orderBy('id')
      .limit(page.limit + 1)
      .execute();
    return toPage(
      rows,
      page,
      (r) => r.id,
      (r) => ({
        id: r.id,
        tenantId: r.tenant_id,
        name: r.name,
        environment: r.environment,
        createdAt: r.created_at,
      }),
    );
  }
}
