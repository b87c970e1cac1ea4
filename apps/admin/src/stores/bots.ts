import { isBotRoleName, ROLES } from '@relayplane/contract/contract';
import { type Kysely, type Selectable, sql } from 'kysely';
import type { AuditStep } from '../audit/trail.ts';
import type { AdminDatabase, BotKeysTable, BotsTable } from '../db/schema.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from './paging.ts';
import { type BotKeyRecord, type BotRecord, isForeignKeyViolation } from './records.ts';

export interface NewBotKey extends BotKeyRecord {
  /** sha256(token), hex. */
  tokenHash: string;
}

/** An active bot key with the bot it authenticates as. */
export interface AuthenticatedBot {
  bot: BotRecord;
  key: BotKeyRecord;
}

const BOT_COLUMNS = ['b.id', 'b.tenant_id', 'b.project_id', 'b.name', 'b.role', 'b.created_at'] as const;
const KEY_COLUMNS = [
  'k.id',
  'k.tenant_id',
  'k.project_id',
  'k.bot_id',
  'k.display_prefix',
  'k.last_four',
  'k.created_at',
  'k.last_used_at',
  'k.revoked_at',
] as const;

function toBot(row: Selectable<BotsTable>): BotRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    name: row.name,
    // The column's check constraint allows only developer and viewer.
    role: isBotRoleName(row.role) ? row.role : ROLES.viewer,
    createdAt: row.created_at,
  };
}

function toKey(row: Omit<Selectable<BotKeysTable>, 'token_hash'>): BotKeyRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    botId: row.bot_id,
    displayPrefix: row.display_prefix,
    lastFour: row.last_four,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

/** `ADMIN_MAX_ACTIVE_KEYS_PER_BOT`'s default (docs/iam.md, "Limits"). */
export const DEFAULT_MAX_ACTIVE_KEYS_PER_BOT = 10;

/** Bots and their keys. Only the SHA-256 of a bot token is stored. */
export class BotStore {
  readonly #db: Kysely<AdminDatabase>;
  /** Unrevoked keys a bot may have; creating one more is refused ('limit_reached'). */
  readonly maxActiveKeysPerBot: number;
  constructor(db: Kysely<AdminDatabase>, maxActiveKeysPerBot = DEFAULT_MAX_ACTIVE_KEYS_PER_BOT) {
    this.#db = db;
    this.maxActiveKeysPerBot = maxActiveKeysPerBot;
  }

  /**
   * Stores the bot unless its tenant already has `maxBots` bots ('limit_reached'). Creations
   * in one tenant serialise on an advisory lock held until commit, so concurrent requests
   * cannot overshoot the limit. 'project_not_found' when the project is not (or no longer)
   * in the bot's tenant.
   */
  async create(
    bot: BotRecord,
    maxBots: number,
    audit: AuditStep<BotRecord>,
  ): Promise<'created' | 'limit_reached' | 'project_not_found'> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`admin.bots:${bot.tenantId}`}))`.execute(trx);
        const { count } = await trx
          .selectFrom('bots')
          .select((eb) => eb.fn.countAll<string>().as('count'))
          .where('tenant_id', '=', bot.tenantId)
          .executeTakeFirstOrThrow();
        if (Number(count) >= maxBots) return 'limit_reached';
        await trx
          .insertInto('bots')
          .values({
            id: bot.id,
            tenant_id: bot.tenantId,
            project_id: bot.projectId,
            name: bot.name,
            role: bot.role,
            created_at: bot.createdAt,
          })
          .execute();
        await audit(trx, bot);
        return 'created';
      });
    } catch (err) {
      if (isForeignKeyViolation(err, 'bots_project_fkey')) return 'project_not_found';
      throw err;
    }
  }

  /** A page of the project's bots, oldest first. */
  async list(tenantId: string, projectId: string, page: PageRequest): Promise<Page<BotRecord>> {
    let query = this.#db
      .selectFrom('bots as b')
      .select(BOT_COLUMNS)
      .select(positionAt('b.created_at').as('position_at'))
      .where('b.project_id', '=', projectId)
      .where('b.tenant_id', '=', tenantId);
    if (page.after) query = query.where(after('b.created_at', 'b.id', 'asc', page.after));
    const rows = await query
      .orderBy('b.created_at')
      .orderBy('b.id')
      .limit(page.limit + 1)
      .execute();
    return toPage(rows, page, (r) => r.id, toBot);
  }

  /** The bot with this id in this project and tenant; undefined as well when it is elsewhere. */
  async find(tenantId: string, projectId: string, botId: string): Promise<BotRecord | undefined> {
    const row = await this.#db
      .selectFrom('bots as b')
      .select(BOT_COLUMNS)
      .where('b.id', '=', botId)
      .where('b.project_id', '=', projectId)
      .where('b.tenant_id', '=', tenantId)
      .executeTakeFirst();
    return row && toBot(row);
  }

  /**
   * Stores the key unless its bot already has `maxActiveKeysPerBot` active (unrevoked) keys
   * ('limit_reached'). Creations for one bot serialise on an advisory lock held until commit,
   * so concurrent requests cannot overshoot the limit; a revoked key frees its place.
   * 'bot_not_found' when the bot is not (or no longer) in that project and tenant.
   */
  async createKey(
    key: NewBotKey,
    audit: AuditStep<BotKeyRecord>,
  ): Promise<'created' | 'limit_reached' | 'bot_not_found'> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`admin.bot_keys:${key.botId}`}))`.execute(trx);
        const { count } = await trx
          .selectFrom('bot_keys')
          .select((eb) => eb.fn.countAll<string>().as('count'))
          .where('bot_id', '=', key.botId)
          .where('revoked_at', 'is', null)
          .executeTakeFirstOrThrow();
        if (Number(count) >= this.maxActiveKeysPerBot) return 'limit_reached';
        await trx
          .insertInto('bot_keys')
          .values({
            id: key.id,
            tenant_id: key.tenantId,
            project_id: key.projectId,
            bot_id: key.botId,
            token_hash: key.tokenHash,
            display_prefix: key.displayPrefix,
            last_four: key.lastFour,
            created_at: key.createdAt,
          })
          .execute();
        const { tokenHash: _, ...record } = key;
        await audit(trx, record);
        return 'created';
      });
    } catch (err) {
      if (isForeignKeyViolation(err, 'bot_keys_bot_fkey')) return 'bot_not_found';
      throw err;
    }
  }

  /** A page of the bot's keys, revoked ones included, newest first. */
  async listKeys(
    tenantId: string,
    projectId: string,
    botId: string,
    page: PageRequest,
  ): Promise<Page<BotKeyRecord>> {
    let query = this.#db
      .selectFrom('bot_keys as k')
      .select(KEY_COLUMNS)
      .select(positionAt('k.created_at').as('position_at'))
      .where('k.bot_id', '=', botId)
      .where('k.project_id', '=', projectId)
      .where('k.tenant_id', '=', tenantId);
    if (page.after) query = query.where(after('k.created_at', 'k.id', 'desc', page.after));
    const rows = await query
      .orderBy('k.created_at', 'desc')
      .orderBy('k.id', 'desc')
      .limit(page.limit + 1)
      .execute();
    return toPage(rows, page, (r) => r.id, toKey);
  }

  /** Revokes the key at `now`, or leaves an earlier revocation as it is (idempotent). */
  async revokeKey(
    tenantId: string,
    projectId: string,
    botId: string,
    keyId: string,
    now: Date,
    audit: AuditStep<{ key: BotKeyRecord; alreadyRevoked: boolean }>,
  ): Promise<BotKeyRecord | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('bot_keys as k')
        .set({ revoked_at: sql<Date>`coalesce(k.revoked_at, ${now})` })
        .where('k.id', '=', keyId)
        .where('k.bot_id', '=', botId)
        .where('k.project_id', '=', projectId)
        .where('k.tenant_id', '=', tenantId)
        .returning(KEY_COLUMNS)
        .executeTakeFirst();
      if (!row) return undefined;
      const key = toKey(row);
      await audit(trx, { key, alreadyRevoked: key.revokedAt?.getTime() !== now.getTime() });
      return key;
    });
  }

  /** The active key with this token hash and its bot: one lookup by unique index. */
  async findActiveByTokenHash(tokenHash: string): Promise<AuthenticatedBot | undefined> {
    const row = await this.#db
      .selectFrom('bot_keys as k')
      .innerJoin('bots as b', 'b.id', 'k.bot_id')
      .select(KEY_COLUMNS)
      .select(['b.name as bot_name', 'b.role as bot_role', 'b.created_at as bot_created_at'])
      .where('k.token_hash', '=', tokenHash)
      .where('k.revoked_at', 'is', null)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      key: toKey(row),
      bot: toBot({
        id: row.bot_id,
        tenant_id: row.tenant_id,
        project_id: row.project_id,
        name: row.bot_name,
        role: row.bot_role,
        created_at: row.bot_created_at,
      }),
    };
  }

  /** Records a use at `now` unless one at or after `since` is already recorded. */
  async touchKey(id: string, now: Date, since: Date): Promise<boolean> {
    const res = await this.#db
      .updateTable('bot_keys')
      .set({ last_used_at: now })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', since)]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }
}
