import { isBotRoleName, isRoleName, ROLES, type RoleName } from '@relayplane/contract/contract';
import { type Kysely, type Selectable, sql } from 'kysely';
import type { AuditStep } from '../audit/trail.ts';
import type { AdminDatabase, IdentityTokensTable } from '../db/schema.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from './paging.ts';
import { type BotRecord, type IdentityTokenRecord, isForeignKeyViolation } from './records.ts';

export interface NewIdentityToken extends IdentityTokenRecord {
  /** sha256(token), hex. */
  tokenHash: string;
}

/** A live identity token with the bot (identity) it acts as and its root user's current role. */
export interface AuthenticatedIdentity {
  token: IdentityTokenRecord;
  bot: BotRecord;
  /** The role the chain's root user holds in the tenant now. */
  rootUserRole: RoleName;
}

const COLUMNS = [
  't.id',
  't.tenant_id',
  't.project_id',
  't.bot_id',
  't.scopes',
  't.display_prefix',
  't.last_four',
  't.created_by_user_id',
  't.created_by_token_id',
  't.root_user_id',
  't.root_session_id',
  't.created_at',
  't.expires_at',
  't.last_used_at',
  't.revoked_at',
] as const;

function toRecord(row: Omit<Selectable<IdentityTokensTable>, 'token_hash'>): IdentityTokenRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    botId: row.bot_id,
    scopes: row.scopes,
    displayPrefix: row.display_prefix,
    lastFour: row.last_four,
    createdByUserId: row.created_by_user_id,
    createdByTokenId: row.created_by_token_id,
    rootUserId: row.root_user_id,
    rootSessionId: row.root_session_id,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

/** `ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT`'s default (docs/iam.md, "Limits"). */
export const DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT = 100;

/** Identity tokens. Only the SHA-256 of a token is stored. */
export class IdentityTokenStore {
  readonly #db: Kysely<AdminDatabase>;
  /** Unrevoked, unexpired tokens an identity (a bot) may have; one more is refused ('limit_reached'). */
  readonly maxActivePerBot: number;
  constructor(db: Kysely<AdminDatabase>, maxActivePerBot = DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT) {
    this.#db = db;
    this.maxActivePerBot = maxActivePerBot;
  }

  /**
   * Stores the token unless its bot (the identity) already has `maxActivePerBot` active tokens —
   * unrevoked and unexpired at the token's `createdAt` — ('limit_reached'). Creations for one
   * bot serialise on an advisory lock held until commit, so concurrent requests cannot overshoot
   * the limit; a revoked or expired token frees its place. 'bot_not_found' when the bot is not
   * (or no longer) in that project and tenant.
   */
  async create(
    token: NewIdentityToken,
    audit: AuditStep<IdentityTokenRecord>,
  ): Promise<'created' | 'limit_reached' | 'bot_not_found'> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`admin.identity_tokens:${token.botId}`}))`.execute(
          trx,
        );
        const { count } = await trx
          .selectFrom('identity_tokens')
          .select((eb) => eb.fn.countAll<string>().as('count'))
          .where('bot_id', '=', token.botId)
          .where('revoked_at', 'is', null)
          .where('expires_at', '>', token.createdAt)
          .executeTakeFirstOrThrow();
        if (Number(count) >= this.maxActivePerBot) return 'limit_reached';
        await trx
          .insertInto('identity_tokens')
          .values({
            id: token.id,
            tenant_id: token.tenantId,
            project_id: token.projectId,
            bot_id: token.botId,
            token_hash: token.tokenHash,
            scopes: token.scopes,
            display_prefix: token.displayPrefix,
            last_four: token.lastFour,
            created_by_user_id: token.createdByUserId,
            created_by_token_id: token.createdByTokenId,
            root_user_id: token.rootUserId,
            root_session_id: token.rootSessionId,
            created_at: token.createdAt,
            expires_at: token.expiresAt,
          })
          .execute();
        const { tokenHash: _, ...record } = token;
        await audit(trx, record);
        return 'created';
      });
    } catch (err) {
      if (isForeignKeyViolation(err, 'identity_tokens_bot_fkey')) return 'bot_not_found';
      throw err;
    }
  }

  /** A page of the identity's tokens, revoked and expired ones included, newest first. */
  async list(
    tenantId: string,
    projectId: string,
    botId: string,
    page: PageRequest,
  ): Promise<Page<IdentityTokenRecord>> {
    let query = this.#db
      .selectFrom('identity_tokens as t')
      .select(COLUMNS)
      .select(positionAt('t.created_at').as('position_at'))
      .where('t.bot_id', '=', botId)
      .where('t.project_id', '=', projectId)
      .where('t.tenant_id', '=', tenantId);
    if (page.after) query = query.where(after('t.created_at', 't.id', 'desc', page.after));
    const rows = await query
      .orderBy('t.created_at', 'desc')
      .orderBy('t.id', 'desc')
      .limit(page.limit + 1)
      .execute();
    return toPage(rows, page, (r) => r.id, toRecord);
  }

  /** Revokes the token at `now`, or leaves an earlier revocation as it is (idempotent). */
  async revoke(
    tenantId: string,
    projectId: string,
    botId: string,
    tokenId: string,
    now: Date,
    audit: AuditStep<{ token: IdentityTokenRecord; alreadyRevoked: boolean }>,
  ): Promise<IdentityTokenRecord | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('identity_tokens as t')
        .set({ revoked_at: sql<Date>`coalesce(t.revoked_at, ${now})` })
        .where('t.id', '=', tokenId)
        .where('t.bot_id', '=', botId)
        .where('t.project_id', '=', projectId)
        .where('t.tenant_id', '=', tenantId)
        .returning(COLUMNS)
        .executeTakeFirst();
      if (!row) return undefined;
      const token = toRecord(row);
      await audit(trx, { token, alreadyRevoked: token.revokedAt?.getTime() !== now.getTime() });
      return token;
    });
  }

  /**
   * The token with this hash (or id) and its bot, when it is live: unrevoked, unexpired, every
   * token it descends from live too, and its root user still a member of the tenant.
   */
  findLiveByTokenHash(tokenHash: string, now: Date): Promise<AuthenticatedIdentity | undefined> {
    return this.#findLive('t.token_hash', tokenHash, now);
  }

  findLiveById(id: string, now: Date): Promise<AuthenticatedIdentity | undefined> {
    return this.#findLive('t.id', id, now);
  }

  async #findLive(
    column: 't.id' | 't.token_hash',
    value: string,
    now: Date,
  ): Promise<AuthenticatedIdentity | undefined> {
    const row = await this.#db
      .selectFrom('identity_tokens as t')
      .innerJoin('bots as b', 'b.id', 't.bot_id')
      .innerJoin('memberships as m', (join) =>
        join.onRef('m.user_id', '=', 't.root_user_id').onRef('m.tenant_id', '=', 't.tenant_id'),
      )
      .select(COLUMNS)
      .select([
        'b.name as bot_name',
        'b.role as bot_role',
        'b.created_at as bot_created_at',
        'm.role as root_role',
      ])
      .where(column, '=', value)
      .where('t.revoked_at', 'is', null)
      .where('t.expires_at', '>', now)
      .executeTakeFirst();
    if (!row || !isRoleName(row.root_role)) return undefined;
    if (row.created_by_token_id !== null && !(await this.#ancestorsLive(row.created_by_token_id, now))) {
      return undefined;
    }
    return {
      rootUserRole: row.root_role,
      token: toRecord(row),
      bot: {
        id: row.bot_id,
        tenantId: row.tenant_id,
        projectId: row.project_id,
        name: row.bot_name,
        // The column's check constraint allows only developer and viewer.
        role: isBotRoleName(row.bot_role) ? row.bot_role : ROLES.viewer,
        createdAt: row.bot_created_at,
      },
    };
  }

  /** Whether the token `id` and every token it descends from are unrevoked and unexpired. */
  async #ancestorsLive(id: string, now: Date): Promise<boolean> {
    const dead = await this.#db
      .withRecursive('chain', (db) =>
        db
          .selectFrom('identity_tokens')
          .select(['id', 'created_by_token_id', 'revoked_at', 'expires_at'])
          .where('id', '=', id)
          .unionAll((db) =>
            db
              .selectFrom('identity_tokens as p')
              .innerJoin('chain as c', 'p.id', 'c.created_by_token_id')
              .select(['p.id', 'p.created_by_token_id', 'p.revoked_at', 'p.expires_at']),
          ),
      )
      .selectFrom('chain')
      .select('chain.id')
      .where((eb) => eb.or([eb('chain.revoked_at', 'is not', null), eb('chain.expires_at', '<=', now)]))
      .limit(1)
      .executeTakeFirst();
    // A chain whose first link is gone (deleted with its bot) is dead too.
    const first = await this.#db
      .selectFrom('identity_tokens')
      .select('id')
      .where('id', '=', id)
      .executeTakeFirst();
    return dead === undefined && first !== undefined;
  }

  /** Records a use at `now` unless one at or after `since` is already recorded. */
  async touch(id: string, now: Date, since: Date): Promise<boolean> {
    const res = await this.#db
      .updateTable('identity_tokens')
      .set({ last_used_at: now })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', since)]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }
}
