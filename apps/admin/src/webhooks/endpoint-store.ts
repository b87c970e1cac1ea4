/**
 * A project's webhook endpoints (issue 34): created within the plan's limit, changed, deleted,
 * their secret rotated, and disabled by the platform after failing too long. Each change runs
 * with its audit step in one transaction. Secrets are sealed by the caller; this store keeps
 * the sealed text only.
 */
import { type Kysely, type Selectable, sql } from 'kysely';
import type { AdminTransaction, AuditStep } from '../audit/trail.ts';
import type { AdminDatabase, WebhookEndpointsTable } from '../db/schema.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from '../stores/paging.ts';
import { isForeignKeyViolation } from '../stores/records.ts';

export interface WebhookEndpointRecord {
  id: string;
  tenantId: string;
  projectId: string;
  url: string;
  events: string[];
  description: string;
  enabled: boolean;
  secretSealed: string;
  previousSecretSealed: string | null;
  previousSecretExpiresAt: Date | null;
  failingSince: Date | null;
  disabledAt: Date | null;
  disabledReason: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export type NewWebhookEndpoint = Omit<
  WebhookEndpointRecord,
  'previousSecretSealed' | 'previousSecretExpiresAt' | 'failingSince' | 'disabledAt' | 'disabledReason'
>;

export interface WebhookEndpointChange {
  url?: string;
  events?: string[];
  description?: string;
  enabled?: boolean;
}

export function toEndpoint(row: Selectable<WebhookEndpointsTable>): WebhookEndpointRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    url: row.url,
    events: row.events,
    description: row.description,
    enabled: row.enabled,
    secretSealed: row.secret_sealed,
    previousSecretSealed: row.previous_secret_sealed,
    previousSecretExpiresAt: row.previous_secret_expires_at,
    failingSince: row.failing_since,
    disabledAt: row.disabled_at,
    disabledReason: row.disabled_reason,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

class LimitReached extends Error {}

/**
 * A disabled endpoint's unfinished deliveries end as failed (they would otherwise wait forever,
 * past any retention); after re-enabling, the log's redeliver sends one again.
 */
async function failPending(trx: AdminTransaction, endpointId: string, now: Date, why: string): Promise<void> {
  await trx
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', completed_at: now, queued_at: null, error: why })
    .where('endpoint_id', '=', endpointId)
    .where('status', 'in', ['pending', 'delivering'])
    .execute();
}

export class WebhookEndpointStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /**
   * Stores the endpoint unless the project already has `maxPerProject` ('limit_reached');
   * creations in one project serialise on an advisory lock held until commit.
   */
  async create(
    endpoint: NewWebhookEndpoint,
    maxPerProject: number,
    audit: AuditStep<NewWebhookEndpoint>,
  ): Promise<'created' | 'limit_reached' | 'project_not_found'> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`admin.webhook_endpoints:${endpoint.projectId}`}))`.execute(
          trx,
        );
        await trx
          .insertInto('webhook_endpoints')
          .values({
            id: endpoint.id,
            tenant_id: endpoint.tenantId,
            project_id: endpoint.projectId,
            url: endpoint.url,
            events: endpoint.events,
            description: endpoint.description,
            enabled: endpoint.enabled,
            secret_sealed: endpoint.secretSealed,
            created_at: endpoint.createdAt,
            updated_at: endpoint.updatedAt,
          })
          .execute();
        const { count } = await trx
          .selectFrom('webhook_endpoints')
          .select((eb) => eb.fn.countAll<string>().as('count'))
          .where('project_id', '=', endpoint.projectId)
          .executeTakeFirstOrThrow();
        if (Number(count) > maxPerProject) throw new LimitReached();
        await audit(trx, endpoint);
        return 'created' as const;
      });
    } catch (err) {
      if (err instanceof LimitReached) return 'limit_reached';
      if (isForeignKeyViolation(err, 'webhook_endpoints_project_fkey')) return 'project_not_found';
      throw err;
    }
  }

  async get(tenantId: string, projectId: string, id: string): Promise<WebhookEndpointRecord | undefined> {
    const row = await this.#db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', id)
      .where('project_id', '=', projectId)
      .where('tenant_id', '=', tenantId)
      .executeTakeFirst();
    return row && toEndpoint(row);
  }

  /** Any endpoint by id (the sender's read). */
  async byId(id: string): Promise<WebhookEndpointRecord | undefined> {
    const row = await this.#db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toEndpoint(row);
  }

  /** A page of the project's endpoints, oldest first. */
  async list(tenantId: string, projectId: string, page: PageRequest): Promise<Page<WebhookEndpointRecord>> {
    let query = this.#db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .select(positionAt('created_at').as('position_at'))
      .where('project_id', '=', projectId)
      .where('tenant_id', '=', tenantId);
    if (page.after) query = query.where(after('created_at', 'id', 'asc', page.after));
    const rows = await query
      .orderBy('created_at', 'asc')
      .orderBy('id', 'asc')
      .limit(page.limit + 1)
      .execute();
    return toPage(rows, page, (r) => r.id, toEndpoint);
  }

  /**
   * Applies `change` (re-enabling clears the platform's disabling and the failure streak) with
   * the audit step in the same transaction; undefined when no such endpoint.
   */
  async update(
    tenantId: string,
    projectId: string,
    id: string,
    change: WebhookEndpointChange,
    now: Date,
    audit: AuditStep<WebhookEndpointRecord>,
  ): Promise<WebhookEndpointRecord | undefined> {
    return this.#changeOne(
      (trx) =>
        trx
          .updateTable('webhook_endpoints')
          .set({
            ...(change.url !== undefined ? { url: change.url } : {}),
            ...(change.events !== undefined ? { events: change.events } : {}),
            ...(change.description !== undefined ? { description: change.description } : {}),
            ...(change.enabled !== undefined ? { enabled: change.enabled } : {}),
            ...(change.enabled === true
              ? { disabled_at: null, disabled_reason: null, failing_since: null }
              : {}),
            updated_at: now,
          })
          .where('id', '=', id)
          .where('project_id', '=', projectId)
          .where('tenant_id', '=', tenantId)
          .returningAll()
          .executeTakeFirst(),
      audit,
      change.enabled === false ? (trx) => failPending(trx, id, now, 'the endpoint was disabled') : undefined,
    );
  }

  /** Deletes the endpoint and its deliveries; undefined when no such endpoint. */
  async delete(
    tenantId: string,
    projectId: string,
    id: string,
    audit: AuditStep<WebhookEndpointRecord>,
  ): Promise<WebhookEndpointRecord | undefined> {
    return this.#changeOne(
      (trx) =>
        trx
          .deleteFrom('webhook_endpoints')
          .where('id', '=', id)
          .where('project_id', '=', projectId)
          .where('tenant_id', '=', tenantId)
          .returningAll()
          .executeTakeFirst(),
      audit,
    );
  }

  /**
   * A new secret; the current one becomes the previous one, signing too until `previousUntil`.
   * `seal` seals the new secret (the caller's, so no secret passes through here unsealed).
   */
  async rotate(
    tenantId: string,
    projectId: string,
    id: string,
    sealed: string,
    previousUntil: Date,
    now: Date,
    audit: AuditStep<WebhookEndpointRecord>,
  ): Promise<WebhookEndpointRecord | undefined> {
    return this.#changeOne(
      (trx) =>
        trx
          .updateTable('webhook_endpoints')
          .set((eb) => ({
            previous_secret_sealed: eb.ref('secret_sealed'),
            previous_secret_expires_at: previousUntil,
            secret_sealed: sealed,
            updated_at: now,
          }))
          .where('id', '=', id)
          .where('project_id', '=', projectId)
          .where('tenant_id', '=', tenantId)
          .returningAll()
          .executeTakeFirst(),
      audit,
    );
  }

  /**
   * One endpoint changed by `write` (answering its row, or undefined when there is no such
   * endpoint), then `after` and the audit step, in one transaction.
   */
  #changeOne(
    write: (trx: AdminTransaction) => Promise<Selectable<WebhookEndpointsTable> | undefined>,
    audit: AuditStep<WebhookEndpointRecord>,
    after?: (trx: AdminTransaction) => Promise<void>,
  ): Promise<WebhookEndpointRecord | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await write(trx);
      if (!row) return undefined;
      await after?.(trx);
      const endpoint = toEndpoint(row);
      await audit(trx, endpoint);
      return endpoint;
    });
  }

  /**
   * After an attempt: success clears the failure streak; a failure starts it (if not running)
   * and disables the endpoint once it has run `disableAfterMs` (`disable` is the audit step of
   * that, in the same transaction). Answers whether this call disabled it.
   */
  async recordOutcome(
    trx: AdminTransaction,
    id: string,
    ok: boolean,
    now: Date,
    disableAfterMs: number,
    disable: AuditStep<WebhookEndpointRecord>,
  ): Promise<boolean> {
    if (ok) {
      await trx
        .updateTable('webhook_endpoints')
        .set({ failing_since: null })
        .where('id', '=', id)
        .where('failing_since', 'is not', null)
        .execute();
      return false;
    }
    const row = await trx
      .updateTable('webhook_endpoints')
      .set((eb) => ({ failing_since: eb.fn.coalesce('failing_since', sql<Date>`${now}::timestamptz`) }))
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
    if (!row?.failing_since || !row.enabled) return false;
    if (now.getTime() - row.failing_since.getTime() < disableAfterMs) return false;
    const days = Math.round((disableAfterMs / 86_400_000) * 10) / 10;
    const disabled = await trx
      .updateTable('webhook_endpoints')
      .set({
        enabled: false,
        disabled_at: now,
        disabled_reason: `every delivery attempt failed for ${days} days (since ${row.failing_since.toISOString()})`,
        updated_at: now,
      })
      .where('id', '=', id)
      .where('enabled', '=', true)
      .returningAll()
      .executeTakeFirst();
    if (!disabled) return false;
    await failPending(trx, id, now, 'the endpoint was disabled: failing too long');
    await disable(trx, toEndpoint(disabled));
    return true;
  }
}
