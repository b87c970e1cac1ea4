import { isRoleName } from '@relayplane/shared/contract';
import type { Kysely, Transaction } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from './paging.ts';
import type { SessionKind, SessionRecord } from './records.ts';

/**
 * Work done in the same transaction as a session change (its audit event): when it throws,
 * the change is rolled back.
 */
export type InTransaction<T> = (trx: Transaction<AdminDatabase>, outcome: T) => Promise<unknown>;

/** A session as its user sees it listed: never its token (only the hash is stored). */
export interface SessionInfoRecord {
  id: string;
  /** `browser`: a login the session cookie authenticated; `bearer`: any other login; `cli`: a CLI token. */
  kind: 'browser' | 'bearer' | 'cli';
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date;
  ip: string | null;
  userAgent: string | null;
}

/** A live session as Authenticate needs it: also whether a browser holds it. */
export type LiveSession = SessionRecord & { browser: boolean };

export interface NewSession {
  id: string;
  tokenHash: string;
  userId: string;
  tenantId: string;
  createdAt: Date;
  expiresAt: Date;
  /** Default `session`; `cli` for a CLI token (device flow). */
  kind?: SessionKind;
  /** The creating request's client address and user agent (request context), when known. */
  ip?: string | undefined;
  userAgent?: string | undefined;
}

/** User sessions. Only the SHA-256 of a session token is stored. */
export class SessionStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /** Creates the session; `then` runs in the same transaction (its audit event). */
  async create(session: NewSession, then?: InTransaction<void>): Promise<void> {
    await this.#inTransaction(then !== undefined, async (db) => {
      await db
        .insertInto('sessions')
        .values({
          id: session.id,
          token_hash: session.tokenHash,
          user_id: session.userId,
          tenant_id: session.tenantId,
          created_at: session.createdAt,
          expires_at: session.expiresAt,
          kind: session.kind ?? 'session',
          ip: session.ip ?? null,
          user_agent: session.userAgent ?? null,
        })
        .execute();
      if (then) await then(db as Transaction<AdminDatabase>, undefined);
    });
  }

  /** The unexpired session with this token hash, while its user is still a member of its tenant. */
  findLiveByTokenHash(tokenHash: string, now: Date): Promise<LiveSession | undefined> {
    return this.#findLive('s.token_hash', tokenHash, now);
  }

  /** The unexpired session with this id, while its user is still a member of its tenant. */
  findLiveById(id: string, now: Date): Promise<LiveSession | undefined> {
    return this.#findLive('s.id', id, now);
  }

  async #findLive(
    column: 's.id' | 's.token_hash',
    value: string,
    now: Date,
  ): Promise<LiveSession | undefined> {
    const row = await this.#db
      .selectFrom('sessions as s')
      .innerJoin('users as u', 'u.id', 's.user_id')
      .innerJoin('tenants as t', 't.id', 's.tenant_id')
      .innerJoin('memberships as m', (join) =>
        join.onRef('m.user_id', '=', 's.user_id').onRef('m.tenant_id', '=', 's.tenant_id'),
      )
      .select([
        's.id as session_id',
        's.created_at as session_created_at',
        's.expires_at',
        's.last_seen_at',
        'u.id as user_id',
        'u.email',
        'u.platform_admin',
        'u.created_at as user_created_at',
        't.id as tenant_id',
        't.name as tenant_name',
        't.created_at as tenant_created_at',
        'm.role',
        's.kind',
        's.browser',
      ])
      .where(column, '=', value)
      .where('s.expires_at', '>', now)
      .executeTakeFirst();
    if (!row || !isRoleName(row.role)) return undefined;
    return {
      id: row.session_id,
      createdAt: row.session_created_at,
      expiresAt: row.expires_at,
      lastSeenAt: row.last_seen_at,
      user: {
        id: row.user_id,
        email: row.email,
        platformAdmin: row.platform_admin,
        createdAt: row.user_created_at,
      },
      tenant: { id: row.tenant_id, name: row.tenant_name, createdAt: row.tenant_created_at },
      role: row.role,
      kind: row.kind === 'cli' ? 'cli' : 'session',
      browser: row.browser,
    };
  }

  /**
   * Moves the session to `tenantId`, in one conditional statement, only while its user is a
   * member there. False when not a member (or no such session).
   */
  async switchTenant(id: string, userId: string, tenantId: string): Promise<boolean> {
    const res = await this.#db
      .updateTable('sessions')
      .set({ tenant_id: tenantId })
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .where((eb) =>
        eb.exists(
          eb
            .selectFrom('memberships')
            .select('memberships.user_id')
            .where('memberships.tenant_id', '=', tenantId)
            .where('memberships.user_id', '=', userId),
        ),
      )
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /**
   * Records a use: `last_seen_at` (answered as `last_used_at`), and, when the session cookie
   * authenticated it, that a browser holds it. Authenticate calls it at most once a minute per
   * session, and once more the first time the cookie is seen.
   */
  async touch(id: string, now: Date, viaCookie = false): Promise<void> {
    await this.#db
      .updateTable('sessions')
      .set(viaCookie ? { last_seen_at: now, browser: true } : { last_seen_at: now })
      .where('id', '=', id)
      .execute();
  }

  /** A page of the user's unexpired sessions and CLI tokens, newest first. */
  async listForUser(userId: string, now: Date, page: PageRequest): Promise<Page<SessionInfoRecord>> {
    let query = this.#db
      .selectFrom('sessions')
      .select(['id', 'kind', 'browser', 'created_at', 'last_seen_at', 'expires_at', 'ip', 'user_agent'])
      .select(positionAt('created_at').as('position_at'))
      .where('user_id', '=', userId)
      .where('expires_at', '>', now);
    if (page.after) query = query.where(after('created_at', 'id', 'desc', page.after));
    const rows = await query
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit + 1)
      .execute();
    return toPage(
      rows,
      page,
      (r) => r.id,
      (r) => ({
        id: r.id,
        kind: r.kind === 'cli' ? 'cli' : r.browser ? 'browser' : 'bearer',
        createdAt: r.created_at,
        lastUsedAt: r.last_seen_at,
        expiresAt: r.expires_at,
        ip: r.ip,
        userAgent: r.user_agent,
      }),
    );
  }

  /**
   * Deletes the session if it belongs to `userId`, and answers whether it did; `then` runs in
   * the same transaction when it did. Deleting a missing session is not an error.
   */
  async delete(id: string, userId: string, then?: InTransaction<void>): Promise<boolean> {
    return this.#inTransaction(then !== undefined, async (db) => {
      const res = await db
        .deleteFrom('sessions')
        .where('id', '=', id)
        .where('user_id', '=', userId)
        .executeTakeFirst();
      const deleted = Number(res.numDeletedRows) > 0;
      if (deleted && then) await then(db as Transaction<AdminDatabase>, undefined);
      return deleted;
    });
  }

  /**
   * Deletes every session and CLI token of `userId` except `keepId`; answers how many of them
   * were still valid at `now` (expired ones not yet swept go too, uncounted: they ended already).
   * `then` runs in the same transaction with that count.
   */
  async deleteOthers(
    userId: string,
    keepId: string,
    now: Date,
    then?: InTransaction<number>,
  ): Promise<number> {
    return this.#inTransaction(then !== undefined, async (db) => {
      const revoked = await deleteOthersIn(db, userId, keepId, now);
      if (then) await then(db as Transaction<AdminDatabase>, revoked);
      return revoked;
    });
  }

  /**
   * Replaces the user's password hash, only while it is still `currentHash` (a concurrent
   * change wins: `stale`), and deletes every other session and CLI token of the user, in one
   * transaction with `then` (given the count of those still valid at `change.now`). Answers the count.
   */
  async changePassword(
    change: { userId: string; currentHash: string; newHash: string; keepId: string; now: Date },
    then?: InTransaction<number>,
  ): Promise<number | 'stale'> {
    return this.#db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('users')
        .set({ password_hash: change.newHash })
        .where('id', '=', change.userId)
        .where('password_hash', '=', change.currentHash)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) return 'stale' as const;
      const revoked = await deleteOthersIn(trx, change.userId, change.keepId, change.now);
      if (then) await then(trx, revoked);
      return revoked;
    });
  }

  /** Removes sessions that expired before `now`; returns how many. */
  async deleteExpired(now: Date): Promise<number> {
    const res = await this.#db.deleteFrom('sessions').where('expires_at', '<=', now).executeTakeFirst();
    return Number(res.numDeletedRows);
  }

  /** Runs `work` in a transaction when asked to (a step must share it), else directly. */
  #inTransaction<T>(transactional: boolean, work: (db: Kysely<AdminDatabase>) => Promise<T>): Promise<T> {
    if (!transactional || this.#db.isTransaction) return work(this.#db);
    return this.#db.transaction().execute((trx) => work(trx));
  }
}

/** Deletes the user's other sessions; counts those unexpired at `now` (what the caller revoked). */
async function deleteOthersIn(
  db: Kysely<AdminDatabase>,
  userId: string,
  keepId: string,
  now: Date,
): Promise<number> {
  const deleted = await db
    .deleteFrom('sessions')
    .where('user_id', '=', userId)
    .where('id', '<>', keepId)
    .returning('expires_at')
    .execute();
  return deleted.filter((row) => row.expires_at.getTime() > now.getTime()).length;
}
