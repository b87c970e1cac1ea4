/** Credential rows and the revocation feed (Postgres, the source of truth). */
import { type Kysely, sql } from 'kysely';
import type { IssuerDatabase } from '../db/schema.ts';
import type { DurableLease } from './slot-store.ts';

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

// Revocations take this transaction-scoped advisory lock, so feed sequences become visible
// in the order they were taken: a reader past sequence n never misses a later commit of n-1.
const REVOCATION_FEED_LOCK = 0x72706376; // "rpcv"

export class CredentialStore {
  readonly #db: Kysely<IssuerDatabase>;

  constructor(db: Kysely<IssuerDatabase>) {
    this.#db = db;
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
    audit?: (trx: Kysely<IssuerDatabase>) => Promise<unknown>,
  ): Promise<RevokeResult | undefined> {
    return this.#db.transaction().execute(async (tx) => {
      const updated = await tx
        .updateTable('credentials')
        .set({ revoked_at: now })
        .where('jti', '=', jti)
        .where('tenant_id', '=', tenantId)
        .where('revoked_at', 'is', null)
        .returning(['expires_at'])
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
      await audit?.(tx);
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
   * Marks a recorded credential that was never handed out as revoked (its issuance was refused
   * after the row committed), so no rebuild of its tenant's slots counts it. Not in the feed:
   * nobody ever held the token. Idempotent.
   */
  async withdraw(jti: string, now: Date): Promise<void> {
    await this.#db
      .updateTable('credentials')
      .set({ revoked_at: now })
      .where('jti', '=', jti)
      .where('revoked_at', 'is', null)
      .execute();
  }

  /**
   * The tenant's live, unrevoked credentials, longest-lived first, at most `limit` (its cap):
   * what its connection slots hold. One range scan of credentials_tenant_live.
   */
  async liveLeases(tenantId: string, limit: number): Promise<DurableLease[]> {
    const rows = await this.#db
      .selectFrom('credentials')
      .select(['jti', 'expires_at'])
      .where('tenant_id', '=', tenantId)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', sql<Date>`now()`)
      .orderBy('expires_at', 'desc')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ jti: r.jti, expiresAtMs: r.expires_at.getTime() }));
  }

  /** True when `jti` is recorded as revoked (false when unknown or not revoked). */
  async isRevoked(jti: string): Promise<boolean> {
    const row = await this.#db
      .selectFrom('credentials')
      .select('revoked_at')
      .where('jti', '=', jti)
      .executeTakeFirst();
    return row?.revoked_at != null;
  }

  /** True when a row exists for `jti` (tests: no credential is ever answered without one). */
  async exists(jti: string): Promise<boolean> {
    return (
      (await this.#db.selectFrom('credentials').select('jti').where('jti', '=', jti).executeTakeFirst()) !==
      undefined
    );
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
