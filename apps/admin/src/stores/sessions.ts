import { isRoleName } from '@relayplane/shared/contract';
import type { Kysely } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import type { SessionKind, SessionRecord } from './records.ts';

export interface NewSession {
  id: string;
  tokenHash: string;
  userId: string;
  tenantId: string;
  createdAt: Date;
  expiresAt: Date;
  /** Default `session`; `cli` for a CLI token (device flow). */
  kind?: SessionKind;
}

/** User sessions. Only the SHA-256 of a session token is stored. */
export class SessionStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  async create(session: NewSession): Promise<void> {
    await this.#db
      .insertInto('sessions')
      .values({
        id: session.id,
        token_hash: session.tokenHash,
        user_id: session.userId,
        tenant_id: session.tenantId,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        kind: session.kind ?? 'session',
      })
      .execute();
  }

  /** The unexpired session with this token hash, while its user is still a member of its tenant. */
  findLiveByTokenHash(tokenHash: string, now: Date): Promise<SessionRecord | undefined> {
    return this.#findLive('s.token_hash', tokenHash, now);
  }

  /** The unexpired session with this id, while its user is still a member of its tenant. */
  findLiveById(id: string, now: Date): Promise<SessionRecord | undefined> {
    return this.#findLive('s.id', id, now);
  }

  async #findLive(
    column: 's.id' | 's.token_hash',
    value: string,
    now: Date,
  ): Promise<SessionRecord | undefined> {
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

  async touch(id: string, now: Date): Promise<void> {
    await this.#db.updateTable('sessions').set({ last_seen_at: now }).where('id', '=', id).execute();
  }

  /** Deletes the session if it belongs to `userId`; deleting a missing session is not an error. */
  async delete(id: string, userId: string): Promise<void> {
    await this.#db.deleteFrom('sessions').where('id', '=', id).where('user_id', '=', userId).execute();
  }

  /** Removes sessions that expired before `now`; returns how many. */
  async deleteExpired(now: Date): Promise<number> {
    const res = await this.#db.deleteFrom('sessions').where('expires_at', '<=', now).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
