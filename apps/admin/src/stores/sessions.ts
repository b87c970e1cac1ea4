import { isRoleName } from '@relayplane/contract/contract';
import { type Kysely, sql, type Transaction } from 'kysely';
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

/**
 * A live session as Authenticate needs it: also whether a browser holds it, and whether its
 * tenant requires a second factor its user does not have (then it may only enrol: issue 31).
 */
export type LiveSession = SessionRecord & { browser: boolean; mfaMissing: boolean };

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
  /**
   * The user's credentials epoch the decision to create the session was taken under: the row is
   * written only while the user still has it (a password change or "sign out everywhere" in
   * between refuses the session).
   */
  credentialsEpoch: number;
  /** A login: the password hash the password was verified against; the row is written only while it is current. */
  passwordHash?: string;
}

/** What ending a user's other access revoked (password change, "sign out everywhere"). */
export interface RevokedAccess {
  sessions: number;
  deviceGrants: number;
  identityTokens: number;
}

/** Ends every access of `userId` derived from credentials other than the kept session's. */
export interface EndOthers {
  userId: string;
  /** The session the request came with: it stays, moved to the new epoch. */
  keepId: string;
  now: Date;
  /** Revoke the identity tokens rooted at the user (but those created under the kept session). */
  revokeIdentityTokens: boolean;
}

/** User sessions. Only the SHA-256 of a session token is stored. */
export class SessionStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /**
   * Creates the session only while its user still has `credentialsEpoch` (and, for a login, the
   * password hash it verified): one conditional INSERT … SELECT, so a password change committed
   * after the check and before the insert leaves no session. `then` runs in the same transaction
   * (its audit event) when the session was created. Answers whether it was.
   */
  async create(session: NewSession, then?: InTransaction<void>): Promise<boolean> {
    return this.#inTransaction(then !== undefined, async (db) => {
      const res = await db
        .insertInto('sessions')
        .columns([
          'id',
          'token_hash',
          'user_id',
          'tenant_id',
          'created_at',
          'expires_at',
          'kind',
          'ip',
          'user_agent',
          'credentials_epoch',
        ])
        .expression((eb) => {
          let q = eb
            .selectFrom('users')
            .select([
              sql<string>`${session.id}::text`.as('id'),
              sql<string>`${session.tokenHash}::text`.as('token_hash'),
              'users.id as user_id',
              sql<string>`${session.tenantId}::text`.as('tenant_id'),
              sql<Date>`${session.createdAt}::timestamptz`.as('created_at'),
              sql<Date>`${session.expiresAt}::timestamptz`.as('expires_at'),
              sql<string>`${session.kind ?? 'session'}::text`.as('kind'),
              sql<string | null>`${session.ip ?? null}::text`.as('ip'),
              sql<string | null>`${session.userAgent ?? null}::text`.as('user_agent'),
              'users.credentials_epoch',
            ])
            .where('users.id', '=', session.userId)
            .where('users.credentials_epoch', '=', session.credentialsEpoch);
          if (session.passwordHash !== undefined) {
            q = q.where('users.password_hash', '=', session.passwordHash);
          }
          return q;
        })
        .executeTakeFirst();
      const created = Number(res.numInsertedOrUpdatedRows ?? 0n) > 0;
      if (created && then) await then(db as Transaction<AdminDatabase>, undefined);
      return created;
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
        't.require_mfa',
        (eb) =>
          eb
            .exists(
              eb
                .selectFrom('user_totp as f')
                .select('f.user_id')
                .whereRef('f.user_id', '=', 's.user_id')
                .where('f.status', '=', 'confirmed'),
            )
            .as('has_second_factor'),
      ])
      .where(column, '=', value)
      .where('s.expires_at', '>', now)
      // Made under the user's current credentials (a password change or "sign out everywhere" moves them on).
      .whereRef('s.credentials_epoch', '=', 'u.credentials_epoch')
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
      mfaMissing: row.require_mfa && !row.has_second_factor,
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
   * "Sign out everywhere": ends every access of the user but the kept session (endOthersIn), in
   * one transaction with `then` (given what was revoked).
   */
  async deleteOthers(end: EndOthers, then?: InTransaction<RevokedAccess>): Promise<RevokedAccess> {
    return this.#db.transaction().execute(async (trx) => {
      const revoked = await endOthersIn(trx, end);
      if (then) await then(trx, revoked);
      return revoked;
    });
  }

  /**
   * Replaces the user's password hash, only while it is still `currentHash` (a concurrent
   * change wins: `stale`), and ends every other access of the user (endOthersIn), in one
   * transaction with `then` (given what was revoked).
   */
  async changePassword(
    change: EndOthers & { currentHash: string; newHash: string },
    then?: InTransaction<RevokedAccess>,
  ): Promise<RevokedAccess | 'stale'> {
    return this.#db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('users')
        .set({ password_hash: change.newHash })
        .where('id', '=', change.userId)
        .where('password_hash', '=', change.currentHash)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) return 'stale' as const;
      const revoked = await endOthersIn(trx, change);
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

/**
 * Ends every access of the user derived from credentials other than the kept session's: moves
 * the user's credentials epoch on (the kept session with it), so a login whose password check
 * overlapped, a session or CLI token not deleted here, or a grant approved under the old epoch
 * is refused from now on; deletes the other sessions and CLI tokens; ends the approved,
 * unredeemed device grants (they become `denied`); and, unless asked not to, revokes the live
 * identity tokens rooted at the user except those created under the kept session. Counts what
 * was still valid at `now` (expired rows not yet swept go too, uncounted: they ended already).
 */
async function endOthersIn(db: Transaction<AdminDatabase>, end: EndOthers): Promise<RevokedAccess> {
  const bumped = await db
    .updateTable('users')
    .set((eb) => ({ credentials_epoch: eb('credentials_epoch', '+', 1) }))
    .where('id', '=', end.userId)
    .returning('credentials_epoch')
    .executeTakeFirstOrThrow();
  await db
    .updateTable('sessions')
    .set({ credentials_epoch: bumped.credentials_epoch })
    .where('id', '=', end.keepId)
    .where('user_id', '=', end.userId)
    .execute();
  const deleted = await db
    .deleteFrom('sessions')
    .where('user_id', '=', end.userId)
    .where('id', '<>', end.keepId)
    .returning('expires_at')
    .execute();
  const grants = await db
    .updateTable('device_grants')
    .set({ status: 'denied', decided_at: end.now })
    .where('user_id', '=', end.userId)
    .where('status', '=', 'approved')
    .returning('expires_at')
    .execute();
  let identityTokens = 0;
  if (end.revokeIdentityTokens) {
    const tokens = await db
      .updateTable('identity_tokens')
      .set({ revoked_at: end.now })
      .where('root_user_id', '=', end.userId)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', end.now)
      .where((eb) => eb.or([eb('root_session_id', 'is', null), eb('root_session_id', '<>', end.keepId)]))
      .returning('id')
      .execute();
    identityTokens = tokens.length;
  }
  const live = (rows: { expires_at: Date }[]) =>
    rows.filter((row) => row.expires_at.getTime() > end.now.getTime()).length;
  return { sessions: live(deleted), deviceGrants: live(grants), identityTokens };
}
