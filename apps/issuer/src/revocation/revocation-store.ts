/**
 * The revocation feed's records (PostgreSQL, the source of truth): revoked credentials with
 * their feed entries, project watermarks, revoked API keys, and (through `signingKeys`) revoked
 * signing keys. Every write to the feed takes REVOCATION_FEED_LOCK before its sequence.
 */
import { type Kysely, sql } from 'kysely';
import type { IssuerDatabase } from '../db/schema.ts';
import { REVOCATION_FEED_LOCK } from './revocation-feed-lock.ts';
import { type RevocationDatabase, SigningKeyRevocationStore } from './signing-key-revocation-store.ts';

export interface RevocationEntry {
  sequence: bigint;
  jti: string;
  tenantId: string;
  revokedAt: Date;
  expiresAt: Date;
}

export interface RevokeResult {
  jti: string;
  revokedAt: Date;
  expiresAt: Date;
  /** False when the credential was already revoked (nothing changed). */
  newly: boolean;
  /** Feed position of a new revocation. */
  sequence?: bigint;
}

/** What a bulk revocation (RevokeCredentials) matches within one project of one tenant. */
export interface BulkRevokeFilter {
  tenantId: string;
  projectId: string;
  /** Only this key's credentials. */
  apiKeyId?: string;
  /**
   * The key itself is being revoked: it is recorded in `revoked_api_keys` (the writer refuses
   * its credentials from then on), under the table lock described at `revokeMatching`.
   */
  apiKeyRevoked?: boolean;
  /** Only credentials issued before it; it also raises the project's watermark. Whole seconds. */
  issuedBefore?: Date;
}

export interface BulkRevokeResult {
  /** The credentials this call revoked, with their feed positions. */
  revoked: { jti: string; expiresAt: Date; sequence: bigint }[];
  /** Feed position of the raised watermark; undefined when it was not raised. */
  watermarkSequence?: bigint;
}

export interface WatermarkEntry {
  projectId: string;
  tenantId: string;
  issuedBefore: Date;
  sequence: bigint;
}

/**
 * How long a bulk revocation that records a revoked key waits for its locks (the table lock
 * waits for inserts under way): past it, PostgreSQL cancels the statement (SQLSTATE 55P03), the
 * transaction rolls back and the caller answers `unavailable`.
 */
export const BULK_REVOKE_LOCK_TIMEOUT_MS = 2_000;

/** SQLSTATE lock_not_available: a lock wait outlasted `lock_timeout`. */
export const LOCK_NOT_AVAILABLE = '55P03';

export class RevocationStore {
  readonly #db: Kysely<IssuerDatabase>;
  readonly #schema: string;
  /** Revoked signing keys (the feed's `revoked_keys`, and the revocation itself). */
  readonly signingKeys: SigningKeyRevocationStore;

  /** `schema`: the issuer's PostgreSQL schema (the bulk revocation names its table in raw SQL). */
  constructor(db: Kysely<IssuerDatabase>, schema = 'issuer') {
    this.#db = db;
    this.#schema = schema;
    this.signingKeys = new SigningKeyRevocationStore(db, schema);
  }

  /**
   * Revokes `jti` of `tenantId` at `now`; undefined when the tenant has no such credential.
   * Idempotent: a revoked credential answers its first `revoked_at`. A new revocation is
   * appended to the feed in the same transaction, and `audit` (the audit outbox's event) runs
   * in it too: if it throws, nothing is revoked.
   */
  async revoke(
    tenantId: string,
    jti: string,
    now: Date,
    audit?: (trx: Kysely<IssuerDatabase>, credential: { projectId: string }) => Promise<unknown>,
  ): Promise<RevokeResult | undefined> {
    return this.#db.transaction().execute(async (tx) => {
      const updated = await tx
        .updateTable('credentials')
        .set({ revoked_at: now })
        .where('jti', '=', jti)
        .where('tenant_id', '=', tenantId)
        .where('revoked_at', 'is', null)
        .returning(['expires_at', 'project_id'])
        .executeTakeFirst();
      if (!updated) {
        const existing = await tx
          .selectFrom('credentials')
          .select(['revoked_at', 'expires_at'])
          .where('jti', '=', jti)
          .where('tenant_id', '=', tenantId)
          .executeTakeFirst();
        if (!existing?.revoked_at) return undefined;
        return { jti, revokedAt: existing.revoked_at, expiresAt: existing.expires_at, newly: false };
      }
      await sql`select pg_advisory_xact_lock(${REVOCATION_FEED_LOCK})`.execute(tx);
      const row = await tx
        .insertInto('revocations')
        .values({ jti, tenant_id: tenantId, revoked_at: now, expires_at: updated.expires_at })
        .returning(['sequence'])
        .executeTakeFirstOrThrow();
      await audit?.(tx, { projectId: updated.project_id });
      return {
        jti,
        revokedAt: now,
        expiresAt: updated.expires_at,
        newly: true,
        sequence: BigInt(row.sequence),
      };
    });
  }

  /**
   * Revokes every unexpired, unrevoked credential of the project matching `filter`, in one
   * transaction, each with its feed entry; with `apiKeyRevoked`, records the API key as revoked
   * (the writer refuses its credentials from then on); raises the project's watermark (never
   * lowers it). `inTransaction` runs last in the same transaction (the audit outbox row): if it
   * throws, nothing changed.
   *
   * Only with `apiKeyRevoked` does the transaction first lock `credentials` in SHARE ROW
   * EXCLUSIVE mode: it waits for the inserts under way (so its update sees their rows) and holds
   * new ones back until it commits (so they see the revoked key). Issuance — every tenant's —
   * pauses for the length of this transaction: one update and one insert of N rows over the
   * tenant's live credentials (at most its cap). Every lock wait of the transaction is bounded by
   * `lock_timeout` (BULK_REVOKE_LOCK_TIMEOUT_MS): past it the call fails with SQLSTATE 55P03 and
   * nothing changed.
   */
  async revokeMatching(
    filter: BulkRevokeFilter,
    now: Date,
    inTransaction?: (tx: Kysely<IssuerDatabase>, revoked: number) => Promise<unknown>,
  ): Promise<BulkRevokeResult> {
    const { tenantId, projectId, apiKeyId, apiKeyRevoked, issuedBefore } = filter;
    if (apiKeyRevoked && !apiKeyId) throw new Error('apiKeyRevoked needs apiKeyId');
    return this.#db.transaction().execute(async (tx) => {
      await sql`select set_config('lock_timeout', ${`${BULK_REVOKE_LOCK_TIMEOUT_MS}ms`}, true)`.execute(tx);
      if (apiKeyRevoked) {
        await sql`lock table ${sql.id(this.#schema, 'credentials')} in share row exclusive mode`.execute(tx);
      }
      await sql`select pg_advisory_xact_lock(${REVOCATION_FEED_LOCK})`.execute(tx);
      if (apiKeyId && apiKeyRevoked) {
        await tx
          .insertInto('revoked_api_keys')
          .values({ api_key_id: apiKeyId, tenant_id: tenantId, project_id: projectId, revoked_at: now })
          .onConflict((oc) => oc.column('api_key_id').doNothing())
          .execute();
      }
      // The range of credentials_tenant_live: at most the tenant's cap of rows.
      let update = tx
        .updateTable('credentials')
        .set({ revoked_at: now })
        .where('tenant_id', '=', tenantId)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', now)
        .where('project_id', '=', projectId);
      if (apiKeyId) update = update.where('api_key_id', '=', apiKeyId);
      if (issuedBefore) update = update.where('issued_at', '<', issuedBefore);
      const updated = await update.returning(['jti', 'expires_at']).execute();
      const revoked: BulkRevokeResult['revoked'] = [];
      if (updated.length > 0) {
        const rows = await tx
          .insertInto('revocations')
          .columns(['jti', 'tenant_id', 'revoked_at', 'expires_at'])
          .expression(
            sql`select jti, ${tenantId}, ${now}::timestamptz, expires_at
              from unnest(${updated.map((u) => u.jti)}::text[], ${updated.map((u) => u.expires_at.toISOString())}::timestamptz[])
              as u(jti, expires_at)`,
          )
          .returning(['sequence', 'jti', 'expires_at'])
          .execute();
        for (const r of rows)
          revoked.push({ jti: r.jti, expiresAt: r.expires_at, sequence: BigInt(r.sequence) });
      }
      let watermarkSequence: bigint | undefined;
      if (issuedBefore) {
        // Same sequence as the feed (taken under its lock): raising a watermark moves the cursor.
        const next = sql<string>`nextval(pg_get_serial_sequence(${`"${this.#schema}".revocations`}, 'sequence'))`;
        const raised = await tx
          .insertInto('project_watermarks')
          .values({
            project_id: projectId,
            tenant_id: tenantId,
            issued_before: issuedBefore,
            sequence: next as unknown as string,
            updated_at: now,
          })
          .onConflict((oc) =>
            oc
              .column('project_id')
              .doUpdateSet({
                issued_before: (eb) => eb.ref('excluded.issued_before'),
                sequence: (eb) => eb.ref('excluded.sequence'),
                updated_at: (eb) => eb.ref('excluded.updated_at'),
              })
              .where('project_watermarks.issued_before', '<', (eb) => eb.ref('excluded.issued_before')),
          )
          .returning('sequence')
          .executeTakeFirst();
        if (raised) watermarkSequence = BigInt(raised.sequence);
      }
      await inTransaction?.(tx, revoked.length);
      return { revoked, watermarkSequence };
    });
  }

  /** Watermarks whose `issued_before` is after `since` (older ones no longer refuse anything live). */
  async watermarksSince(since: Date): Promise<WatermarkEntry[]> {
    const rows = await this.#db
      .selectFrom('project_watermarks')
      .select(['project_id', 'tenant_id', 'issued_before', 'sequence'])
      .where('issued_before', '>', since)
      .orderBy('sequence')
      .execute();
    return rows.map((r) => ({
      projectId: r.project_id,
      tenantId: r.tenant_id,
      issuedBefore: r.issued_before,
      sequence: BigInt(r.sequence),
    }));
  }

  /**
   * True when `jti` is recorded as revoked (false when unknown or not revoked), or — given its
   * project and `iat` (seconds) — issued before its project's watermark, row or no row, or —
   * given the `kid` of its JWT header — signed by a revoked signing key. One round trip either
   * way.
   */
  async isRevoked(jti: string, issued?: { projectId: string; iat: number; kid?: string }): Promise<boolean> {
    if (!issued) {
      const row = await this.#db
        .selectFrom('credentials')
        .select('revoked_at')
        .where('jti', '=', jti)
        .executeTakeFirst();
      return row?.revoked_at != null;
    }
    const db = this.#db as unknown as Kysely<RevocationDatabase>;
    const { refused } = await db
      .selectNoFrom((eb) => [
        eb
          .or([
            eb.exists(
              eb
                .selectFrom('credentials')
                .select('jti')
                .where('jti', '=', jti)
                .where('revoked_at', 'is not', null),
            ),
            eb.exists(
              eb
                .selectFrom('project_watermarks')
                .select('project_id')
                .where('project_id', '=', issued.projectId)
                .where('issued_before', '>', new Date(issued.iat * 1000)),
            ),
            ...(issued.kid === undefined
              ? []
              : [
                  eb.exists(
                    eb.selectFrom('revoked_signing_keys').select('kid').where('kid', '=', issued.kid),
                  ),
                ]),
          ])
          .as('refused'),
      ])
      .executeTakeFirstOrThrow();
    return refused === true;
  }

  /** Feed entries after `cursor`, oldest first. */
  async revocationsAfter(cursor: bigint, limit: number): Promise<RevocationEntry[]> {
    const rows = await this.#db
      .selectFrom('revocations')
      .select(['sequence', 'jti', 'tenant_id', 'revoked_at', 'expires_at'])
      .where('sequence', '>', sql<string>`${cursor.toString()}::bigint`)
      .orderBy('sequence')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      sequence: BigInt(r.sequence),
      jti: r.jti,
      tenantId: r.tenant_id,
      revokedAt: r.revoked_at,
      expiresAt: r.expires_at,
    }));
  }
}
