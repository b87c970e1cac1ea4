import { DEFAULT_KEY_MODE, isKeyMode } from '@relayplane/contract/contract';
import { type Kysely, type Selectable, sql } from 'kysely';
import type { AuditStep } from '../audit/trail.ts';
import type { AdminDatabase, ApiKeysTable } from '../db/schema.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from './paging.ts';
import { type ApiKeyRecord, isForeignKeyViolation } from './records.ts';

export interface NewApiKey extends ApiKeyRecord {
  /** sha256(key), hex. */
  keyHash: string;
}

export interface VerifiedApiKey {
  apiKey: ApiKeyRecord;
  projectEnvironment: string;
  /** The project's IP allowlist (normalised CIDRs), oldest entry first; empty when none. */
  allowlist: string[];
}

const COLUMNS = [
  'k.id',
  'k.tenant_id',
  'k.project_id',
  'k.name',
  'k.mode',
  'k.display_prefix',
  'k.last_four',
  'k.scopes',
  'k.ceiling',
  'k.created_at',
  'k.last_used_at',
  'k.revoked_at',
] as const;

type ApiKeyRow = Omit<Selectable<ApiKeysTable>, 'key_hash'>;

function toRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    name: row.name,
    // The column's check constraint allows only these.
    mode: isKeyMode(row.mode) ? row.mode : DEFAULT_KEY_MODE,
    displayPrefix: row.display_prefix,
    lastFour: row.last_four,
    scopes: row.scopes,
    ceiling: row.ceiling,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

/** Project API keys. Only the SHA-256 of a key is stored. */
export class ApiKeyStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /**
   * Stores the key unless its tenant already has `maxActive` active (unrevoked) keys
   * ('limit_reached'). Creations in one tenant serialise on an advisory lock held until
   * commit, so concurrent requests cannot overshoot the limit. 'project_not_found' when the
   * project is not (or no longer) in the key's tenant.
   */
  async create(
    key: NewApiKey,
    maxActive: number,
    audit: AuditStep<ApiKeyRecord>,
  ): Promise<'created' | 'limit_reached' | 'project_not_found'> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`admin.api_keys:${key.tenantId}`}))`.execute(trx);
        const { count } = await trx
          .selectFrom('api_keys')
          .select((eb) => eb.fn.countAll<string>().as('count'))
          .where('tenant_id', '=', key.tenantId)
          .where('revoked_at', 'is', null)
          .executeTakeFirstOrThrow();
        if (Number(count) >= maxActive) return 'limit_reached';
        await trx
          .insertInto('api_keys')
          .values({
            id: key.id,
            tenant_id: key.tenantId,
            project_id: key.projectId,
            name: key.name,
            mode: key.mode,
            key_hash: key.keyHash,
            display_prefix: key.displayPrefix,
            last_four: key.lastFour,
            scopes: key.scopes,
            ceiling: key.ceiling ? JSON.stringify(key.ceiling) : null,
            created_at: key.createdAt,
          })
          .execute();
        const { keyHash: _, ...record } = key;
        await audit(trx, record);
        return 'created';
      });
    } catch (err) {
      if (isForeignKeyViolation(err, 'api_keys_project_fkey')) return 'project_not_found';
      throw err;
    }
  }

  /** A page of the project's keys, revoked ones included, newest first; `onlyId` keeps that key only. */
  async list(
    tenantId: string,
    projectId: string,
    page: PageRequest,
    onlyId?: string,
  ): Promise<Page<ApiKeyRecord>> {
    let query = this.#db
      .selectFrom('api_keys as k')
      .select(COLUMNS)
      .select(positionAt('k.created_at').as('position_at'))
      .where('k.project_id', '=', projectId)
      .where('k.tenant_id', '=', tenantId);
    if (onlyId !== undefined) query = query.where('k.id', '=', onlyId);
    if (page.after) query = query.where(after('k.created_at', 'k.id', 'desc', page.after));
    const rows = await query
      .orderBy('k.created_at', 'desc')
      .orderBy('k.id', 'desc')
      .limit(page.limit + 1)
      .execute();
    return toPage(rows, page, (r) => r.id, toRecord);
  }

  /**
   * Revokes the key at `now`, or leaves an earlier revocation as it is (idempotent).
   * Undefined when no such key exists in that project and tenant. `audit` records the call
   * (with whether it revoked the key now) in the same transaction.
   */
  async revoke(
    tenantId: string,
    projectId: string,
    keyId: string,
    now: Date,
    audit: AuditStep<{ apiKey: ApiKeyRecord; alreadyRevoked: boolean }>,
  ): Promise<{ apiKey: ApiKeyRecord; keyHash: string } | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('api_keys as k')
        .set({ revoked_at: sql<Date>`coalesce(k.revoked_at, ${now})` })
        .where('k.id', '=', keyId)
        .where('k.project_id', '=', projectId)
        .where('k.tenant_id', '=', tenantId)
        .returning([...COLUMNS, 'k.key_hash'])
        .executeTakeFirst();
      if (!row) return undefined;
      const apiKey = toRecord(row);
      await audit(trx, { apiKey, alreadyRevoked: apiKey.revokedAt?.getTime() !== now.getTime() });
      return { apiKey, keyHash: row.key_hash };
    });
  }

  /**
   * The active key with this hash, its project's environment and IP allowlist: one query
   * (a lookup by unique index, the allowlist a subselect on its per-project unique index).
   */
  async findActiveByHash(keyHash: string): Promise<VerifiedApiKey | undefined> {
    const row = await this.#db
      .selectFrom('api_keys as k')
      .innerJoin('projects as p', 'p.id', 'k.project_id')
      .select([...COLUMNS, 'p.environment'])
      .select((eb) =>
        sql<string[]>`array(${eb
          .selectFrom('allowlist_entries as a')
          .select('a.cidr')
          .whereRef('a.project_id', '=', 'k.project_id')
          .orderBy('a.created_at')
          .orderBy('a.id')})`.as('allowlist'),
      )
      .where('k.key_hash', '=', keyHash)
      .where('k.revoked_at', 'is', null)
      .executeTakeFirst();
    return row && { apiKey: toRecord(row), projectEnvironment: row.environment, allowlist: row.allowlist };
  }

  /**
   * Records a use at `now` unless one at or after `since` is already recorded (another
   * replica may have written it meanwhile). True when the row was written.
   */
  async touch(id: string, now: Date, since: Date): Promise<boolean> {
    const res = await this.#db
      .updateTable('api_keys')
      .set({ last_used_at: now })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', since)]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }
}
