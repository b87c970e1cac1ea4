/**
 * The relay-session ledger (PostgreSQL, the source of truth): sessions as relays admitted, ended
 * and reported them, and the leases a lost slot set is rebuilt from.
 */
import { type Kysely, type Selectable, sql } from 'kysely';
import type { IssuerDatabase, RelaySessionsTable } from '../db/schema.ts';
import type { DurableLease, SlotLedger } from '../issuance/slot-store.ts';

export type RelaySessionRow = Selectable<RelaySessionsTable>;

/** A session's slot lease id: distinct from any credential's (`crd_…`). */
export const sessionLease = (sessionId: string): string => `s:${sessionId}`;

export interface NewRelaySession {
  id: string;
  relayId: string;
  tenantId: string;
  projectId: string;
  apiKeyId: string;
  jti: string;
  kid: string;
  credentialIat: number;
  transport: string;
  remote: string;
  role: string;
  path: string;
  grantRoot: string;
  /** moq patterns relative to `grantRoot`; empty: the role is not granted. */
  grantPublish: string[];
  grantSubscribe: string[];
  tier: string;
  revalidateSeconds: number;
  startedAt: Date;
  grantExpiresAt: Date;
}

export interface SessionEnd {
  at: Date;
  reason: string;
  /** relay | admin | revocation | expiry */
  endedBy: string;
  /** What the relay reported with `end` (absent when the control plane ended it). */
  durationSeconds?: number;
  bytesSent?: number;
  bytesReceived?: number;
}

/** A page position: the last row of the previous page (newest first). */
export interface SessionListPosition {
  startedAt: Date;
  id: string;
}

export class RelaySessionStore implements SlotLedger {
  readonly #db: Kysely<IssuerDatabase>;
  readonly #connectWindowSeconds: number;

  /** `connectWindowSeconds`: how long an issued credential holds its slot before it connects. */
  constructor(db: Kysely<IssuerDatabase>, connectWindowSeconds: number) {
    this.#db = db;
    this.#connectWindowSeconds = connectWindowSeconds;
  }

  get(id: string): Promise<RelaySessionRow | undefined> {
    return this.#db.selectFrom('relay_sessions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Records a new session; the same id twice keeps the first (returned either way).
   * `onInserted` runs in the inserting transaction when the row is new (its notice).
   */
  async insert(
    s: NewRelaySession,
    onInserted?: (trx: Kysely<IssuerDatabase>, row: RelaySessionRow) => Promise<unknown>,
  ): Promise<RelaySessionRow> {
    const inserted = await this.#db.transaction().execute(async (trx) => {
      const row = await this.#insertRow(trx, s);
      if (row) await onInserted?.(trx, row);
      return row;
    });
    if (inserted) return inserted;
    const existing = await this.get(s.id);
    if (!existing) throw new Error(`relay session ${s.id} neither inserted nor found`);
    return existing;
  }

  #insertRow(db: Kysely<IssuerDatabase>, s: NewRelaySession): Promise<RelaySessionRow | undefined> {
    return db
      .insertInto('relay_sessions')
      .values({
        id: s.id,
        relay_id: s.relayId,
        tenant_id: s.tenantId,
        project_id: s.projectId,
        api_key_id: s.apiKeyId,
        jti: s.jti,
        kid: s.kid,
        credential_iat: s.credentialIat,
        transport: s.transport,
        remote: s.remote,
        role: s.role,
        path: s.path,
        grant_root: s.grantRoot,
        grant_publish: s.grantPublish.length > 0,
        grant_subscribe: s.grantSubscribe.length > 0,
        grant_publish_patterns: s.grantPublish,
        grant_subscribe_patterns: s.grantSubscribe,
        tier: s.tier,
        revalidate_seconds: s.revalidateSeconds,
        started_at: s.startedAt,
        last_seen_at: s.startedAt,
        grant_expires_at: s.grantExpiresAt,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .returningAll()
      .executeTakeFirst();
  }

  /** A revalidation: the session was seen now and its grant runs to `expiresAt`. Undefined: ended. */
  /**
   * A revalidation's write, in one statement (the hot path): the session of `relayId`, live and
   * its grant not lapsed at `now`, seen now and granted until now + max(`expiresSeconds`, two
   * of its cadences). Undefined: not such a session (the caller looks at why).
   */
  renew(
    id: string,
    relayId: string,
    now: Date,
    expiresSeconds: number,
  ): Promise<RelaySessionRow | undefined> {
    return this.#db
      .updateTable('relay_sessions')
      .set({
        last_seen_at: now,
        grant_expires_at: sql<Date>`${now}::timestamptz + make_interval(secs => greatest(${expiresSeconds}::int, 2 * revalidate_seconds))`,
      })
      .where('id', '=', id)
      .where('relay_id', '=', relayId)
      .where('ended_at', 'is', null)
      .where('grant_expires_at', '>', now)
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * Ends the session. The first end names the reason and who ended it; what the relay reports
   * with its own `end` (duration, bytes) is recorded whenever it arrives, also after the control
   * plane ended the session. Undefined: no such session.
   */
  end(
    id: string,
    end: SessionEnd,
    db: Kysely<IssuerDatabase> = this.#db,
  ): Promise<RelaySessionRow | undefined> {
    const fromRelay = end.durationSeconds !== undefined;
    return db
      .updateTable('relay_sessions')
      .set((eb) => ({
        ended_at: eb.fn.coalesce('ended_at', sql<Date>`${end.at}::timestamptz`),
        end_reason: eb.fn.coalesce('end_reason', sql<string>`${end.reason}::text`),
        ended_by: eb.fn.coalesce('ended_by', sql<string>`${end.endedBy}::text`),
        ...(fromRelay
          ? {
              duration_seconds: end.durationSeconds ?? null,
              bytes_sent: end.bytesSent ?? 0,
              bytes_received: end.bytesReceived ?? 0,
            }
          : {}),
      }))
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * `end` in a transaction that also runs `onFirstEnd` when this call ended a live session (its
   * notice): a later end (the relay's report after the control plane ended it) records what it
   * reports, and no second notice. Undefined: no such session.
   */
  endOnce(
    id: string,
    end: SessionEnd,
    onFirstEnd: (trx: Kysely<IssuerDatabase>, row: RelaySessionRow) => Promise<unknown>,
  ): Promise<RelaySessionRow | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const before = await trx
        .selectFrom('relay_sessions')
        .select('ended_at')
        .where('id', '=', id)
        .forUpdate()
        .executeTakeFirst();
      if (!before) return undefined;
      const row = await this.end(id, end, trx);
      if (row && before.ended_at === null) await onFirstEnd(trx, row);
      return row;
    });
  }

  /**
   * Ends, as expired, sessions whose grant lapsed more than `graceMs` before `now` without an
   * end (their relay stopped revalidating: it died, or lost its way here), at most `limit`, each
   * with `onEnded` in the same transaction. Answers how many.
   */
  async endLapsed(
    now: Date,
    graceMs: number,
    limit: number,
    onEnded: (trx: Kysely<IssuerDatabase>, row: RelaySessionRow) => Promise<unknown>,
  ): Promise<number> {
    return this.#db.transaction().execute(async (trx) => {
      const lapsed = await trx
        .selectFrom('relay_sessions')
        .select('id')
        .where('ended_at', 'is', null)
        .where('grant_expires_at', '<', new Date(now.getTime() - graceMs))
        .orderBy('grant_expires_at')
        .limit(limit)
        .forUpdate()
        .skipLocked()
        .execute();
      if (lapsed.length === 0) return 0;
      const rows = await trx
        .updateTable('relay_sessions')
        .set((eb) => ({
          ended_at: eb.ref('grant_expires_at'),
          end_reason: 'expired',
          ended_by: 'expiry',
        }))
        .where(
          'id',
          'in',
          lapsed.map((r) => r.id),
        )
        .returningAll()
        .execute();
      for (const row of rows) await onEnded(trx, row);
      return rows.length;
    });
  }

  /**
   * The control plane ends a live session of `tenantId` (an administrator), with `record` run in
   * the same transaction (its audit event). Undefined: no such session in the tenant; a session
   * already ended is answered as it is, and `record` is not run.
   */
  endInTenant(
    tenantId: string,
    id: string,
    end: SessionEnd,
    record: (trx: Kysely<IssuerDatabase>) => Promise<void>,
    onEnded?: (trx: Kysely<IssuerDatabase>, row: RelaySessionRow) => Promise<unknown>,
  ): Promise<RelaySessionRow | undefined> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('relay_sessions')
        .selectAll()
        .where('id', '=', id)
        .where('tenant_id', '=', tenantId)
        .forUpdate()
        .executeTakeFirst();
      if (!row || row.ended_at !== null) return row;
      await record(trx);
      const ended = await this.end(id, end, trx);
      if (ended) await onEnded?.(trx, ended);
      return ended;
    });
  }

  /** Sessions not ended and seen within two cadences, over every tenant (the live-sessions gauge). */
  async liveCount(): Promise<number> {
    const row = await this.#db
      .selectFrom('relay_sessions')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('ended_at', 'is', null)
      .where(sql<boolean>`last_seen_at + make_interval(secs => revalidate_seconds * 2) > now()`)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** The tenant's sessions with no end recorded (the partial index `relay_sessions_tenant_live`). */
  async unendedCountOf(tenantId: string): Promise<number> {
    const row = await this.#db
      .selectFrom('relay_sessions')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('tenant_id', '=', tenantId)
      .where('ended_at', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** A project's sessions, newest first, after `after`, at most `limit`. */
  list(query: {
    tenantId: string;
    projectId: string;
    state: 'live' | 'ended' | '';
    limit: number;
    after?: SessionListPosition;
  }): Promise<RelaySessionRow[]> {
    let select = this.#db
      .selectFrom('relay_sessions')
      .selectAll()
      .where('tenant_id', '=', query.tenantId)
      .where('project_id', '=', query.projectId);
    if (query.state === 'live') select = select.where('ended_at', 'is', null);
    if (query.state === 'ended') select = select.where('ended_at', 'is not', null);
    const after = query.after;
    if (after) {
      select = select.where((eb) =>
        eb.or([
          eb('started_at', '<', after.startedAt),
          eb.and([eb('started_at', '=', after.startedAt), eb('id', '<', after.id)]),
        ]),
      );
    }
    return select.orderBy('started_at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  }

  /**
   * SlotLedger: the tenant's slot holders as the ledger says, longest-lived first: credentials
   * issued within the connect window that have not connected (until the window closes or they
   * expire, whichever is first), and sessions not ended that were seen within two cadences.
   */
  async liveLeases(tenantId: string, limit: number): Promise<DurableLease[]> {
    const window = this.#connectWindowSeconds;
    const credentials = this.#db
      .selectFrom('credentials as c')
      .select([
        'c.jti as lease',
        sql<Date>`least(c.expires_at, c.issued_at + make_interval(secs => ${window}))`.as('until'),
      ])
      .where('c.tenant_id', '=', tenantId)
      .where('c.revoked_at', 'is', null)
      .where('c.expires_at', '>', sql<Date>`now()`)
      .where('c.issued_at', '>', sql<Date>`now() - make_interval(secs => ${window})`)
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('relay_sessions as s').select('s.id').whereRef('s.jti', '=', 'c.jti'))),
      );
    const sessions = this.#db
      .selectFrom('relay_sessions')
      .select([
        sql<string>`'s:' || id`.as('lease'),
        sql<Date>`last_seen_at + make_interval(secs => revalidate_seconds * 2)`.as('until'),
      ])
      .where('tenant_id', '=', tenantId)
      .where('ended_at', 'is', null)
      .where(sql<boolean>`last_seen_at + make_interval(secs => revalidate_seconds * 2) > now()`);
    const rows = await this.#db
      .selectFrom(credentials.unionAll(sessions).as('held'))
      .select(['held.lease', 'held.until'])
      .orderBy('held.until', 'desc')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ jti: r.lease, expiresAtMs: new Date(r.until).getTime() }));
  }
}
