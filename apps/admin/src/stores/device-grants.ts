/**
 * OAuth device authorization grants (RFC 8628) in PostgreSQL. Only SHA-256 hashes of device
 * and user codes are stored.
 */
import type { Kysely } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import type { DeviceGrantStatus, PolledGrant } from '../domain/device-codes.ts';
import { isUniqueViolation } from './records.ts';
import { type InTransaction, type NewSession, SessionStore } from './sessions.ts';

export interface NewDeviceGrant {
  deviceCodeHash: string;
  userCodeHash: string;
  clientId: string;
  scope: string;
  intervalSeconds: number;
  createdAt: Date;
  expiresAt: Date;
  /** The requesting device's client address and user agent, when known. */
  requestedIp?: string | undefined;
  requestedUserAgent?: string | undefined;
}

/** A pending grant as the verification page shows it. */
export interface PendingGrant {
  clientId: string;
  expiresAt: Date;
  requestedAt: Date;
  requestedIp: string | null;
  requestedUserAgent: string | null;
}

/** A grant as a poll sees it (hashes only). */
export interface DeviceGrantRecord extends PolledGrant {
  clientId: string;
  userId: string | null;
  tenantId: string | null;
  /** The approver's credentials epoch at the decision (null before approval). */
  credentialsEpoch: number | null;
}

/** What a poll changes: the grant's interval and last poll, and, once approved, the CLI session it consumes into. */
export interface PollUpdate {
  intervalSeconds: number;
  lastPolledAt: Date;
  /** Set: the grant becomes consumed and this session (kind `cli`) is created, in one transaction. */
  consume?: NewSession;
  /** Set: an approval found void (its approver no longer live) becomes `denied`. */
  deny?: boolean;
}

function isStatus(value: string): value is DeviceGrantStatus {
  return value === 'pending' || value === 'approved' || value === 'denied' || value === 'consumed';
}

export class DeviceGrantStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  /** `user_code_taken`: another grant holds this user code (the caller draws another). */
  async create(grant: NewDeviceGrant): Promise<'created' | 'user_code_taken'> {
    try {
      await this.#db
        .insertInto('device_grants')
        .values({
          device_code_hash: grant.deviceCodeHash,
          user_code_hash: grant.userCodeHash,
          client_id: grant.clientId,
          scope: grant.scope,
          status: 'pending',
          interval_seconds: grant.intervalSeconds,
          created_at: grant.createdAt,
          expires_at: grant.expiresAt,
          last_polled_at: null,
          user_id: null,
          tenant_id: null,
          decided_at: null,
          requested_ip: grant.requestedIp ?? null,
          requested_user_agent: grant.requestedUserAgent ?? null,
        })
        .execute();
      return 'created';
    } catch (err) {
      if (isUniqueViolation(err, 'device_grants_user_code_hash_key')) return 'user_code_taken';
      throw err;
    }
  }

  /** The pending, unexpired grant behind a user code. */
  async findPending(userCodeHash: string, now: Date): Promise<PendingGrant | undefined> {
    const row = await this.#db
      .selectFrom('device_grants')
      .select(['client_id', 'expires_at', 'created_at', 'requested_ip', 'requested_user_agent'])
      .where('user_code_hash', '=', userCodeHash)
      .where('status', '=', 'pending')
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return row
      ? {
          clientId: row.client_id,
          expiresAt: row.expires_at,
          requestedAt: row.created_at,
          requestedIp: row.requested_ip,
          requestedUserAgent: row.requested_user_agent,
        }
      : undefined;
  }

  /**
   * Approves (for `userId` in `tenantId`, recording the deciding session and the user's
   * credentials epoch) or denies a pending, unexpired grant, in one
   * conditional statement: of two concurrent decisions only one applies. Undefined when no
   * such grant (unknown, expired or already decided).
   */
  async decide(
    userCodeHash: string,
    now: Date,
    decision: { approve: boolean; userId: string; tenantId: string; sessionId: string },
  ): Promise<{ clientId: string } | undefined> {
    const row = await this.#db
      .updateTable('device_grants')
      .set((eb) => ({
        status: decision.approve ? 'approved' : 'denied',
        user_id: decision.userId,
        tenant_id: decision.tenantId,
        decided_at: now,
        approved_session_id: decision.sessionId,
        credentials_epoch: eb
          .selectFrom('users')
          .select('users.credentials_epoch')
          .where('users.id', '=', decision.userId),
      }))
      .where('user_code_hash', '=', userCodeHash)
      .where('status', '=', 'pending')
      .where('expires_at', '>', now)
      .returning('client_id')
      .executeTakeFirst();
    return row ? { clientId: row.client_id } : undefined;
  }

  /**
   * One poll of the token endpoint. The grant's row is locked (`FOR UPDATE`) while `decide`
   * looks at it and its update (and, when approved, the CLI session) is written: concurrent
   * polls run one after the other, so an approved grant is consumed by exactly one of them.
   * Undefined when no grant has this device code; `update` undefined: nothing is written.
   */
  async poll<T>(
    deviceCodeHash: string,
    now: Date,
    decide: (grant: DeviceGrantRecord) => { update: PollUpdate | undefined; result: T },
    /** Runs in the same transaction once a CLI session was created (its audit event). */
    consumed?: InTransaction<{ grant: DeviceGrantRecord; session: NewSession }>,
  ): Promise<{ grant: DeviceGrantRecord; result: T } | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('device_grants as g')
        .select((eb) => [
          'g.client_id',
          'g.status',
          'g.expires_at',
          'g.interval_seconds',
          'g.last_polled_at',
          'g.user_id',
          'g.tenant_id',
          'g.credentials_epoch',
          // The approving session, unexpired, under the user's current epoch, which is the grant's.
          eb
            .exists(
              eb
                .selectFrom('sessions as s')
                .innerJoin('users as u', 'u.id', 's.user_id')
                .select('s.id')
                .whereRef('s.id', '=', 'g.approved_session_id')
                .whereRef('s.user_id', '=', 'g.user_id')
                .where('s.expires_at', '>', now)
                .whereRef('s.credentials_epoch', '=', 'u.credentials_epoch')
                .whereRef('u.credentials_epoch', '=', 'g.credentials_epoch'),
            )
            .as('approver_live'),
        ])
        .where('g.device_code_hash', '=', deviceCodeHash)
        .forUpdate(['g'])
        .executeTakeFirst();
      if (!row || !isStatus(row.status)) return undefined;
      const grant: DeviceGrantRecord = {
        clientId: row.client_id,
        status: row.status,
        expiresAt: row.expires_at,
        intervalSeconds: row.interval_seconds,
        lastPolledAt: row.last_polled_at,
        userId: row.user_id,
        tenantId: row.tenant_id,
        credentialsEpoch: row.credentials_epoch,
        approverLive: Boolean(row.approver_live),
      };
      const { update, result } = decide(grant);
      if (!update) return { grant, result };
      // The CLI session is written only while the user still has the grant's epoch (a password
      // change committed meanwhile leaves none, and the grant is then void).
      const created = update.consume
        ? await new SessionStore(trx).create({ ...update.consume, kind: 'cli' })
        : false;
      if (update.consume && !created) return undefined;
      if (update.consume && consumed) await consumed(trx, { grant, session: update.consume });
      await trx
        .updateTable('device_grants')
        .set({
          interval_seconds: update.intervalSeconds,
          last_polled_at: update.lastPolledAt,
          ...(update.consume ? { status: 'consumed' } : update.deny ? { status: 'denied' } : {}),
        })
        .where('device_code_hash', '=', deviceCodeHash)
        .execute();
      return { grant, result };
    });
  }

  /** Deletes grants that expired before `before`; returns how many. */
  async deleteExpired(before: Date): Promise<number> {
    const res = await this.#db
      .deleteFrom('device_grants')
      .where('expires_at', '<=', before)
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
