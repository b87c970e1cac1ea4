/** Credential rows (PostgreSQL, the source of truth): listing, slot recovery, withdrawal, retention. */
import { type Kysely, sql } from 'kysely';
import type { IssuerDatabase } from '../db/schema.ts';
import type { DurableLease } from './slot-store.ts';

export interface CredentialListing {
  jti: string;
  apiKeyId: string;
  issuedAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

/** A page position: the last row of the previous page (newest first: issued_at desc, jti desc). */
export interface CredentialListPosition {
  issuedAt: Date;
  jti: string;
}

export class CredentialStore {
  readonly #db: Kysely<IssuerDatabase>;
  readonly #schema: string;

  /** `schema`: the issuer's PostgreSQL schema (retention names its tables in raw SQL). */
  constructor(db: Kysely<IssuerDatabase>, schema = 'issuer') {
    this.#db = db;
    this.#schema = schema;
  }

  /**
   * A project's credentials, newest first (issued_at, then jti, descending), after `after`,
   * at most `limit`. `active`: only unexpired, unrevoked ones at `now`.
   */
  async list(
    query: {
      tenantId: string;
      projectId: string;
      apiKeyId?: string;
      active: boolean;
      limit: number;
      after?: CredentialListPosition;
    },
    now: Date,
  ): Promise<CredentialListing[]> {
    let select = this.#db
      .selectFrom('credentials')
      .select(['jti', 'api_key_id', 'issued_at', 'expires_at', 'revoked_at'])
      .where('tenant_id', '=', query.tenantId)
      .where('project_id', '=', query.projectId);
    if (query.apiKeyId) select = select.where('api_key_id', '=', query.apiKeyId);
    if (query.active) select = select.where('revoked_at', 'is', null).where('expires_at', '>', now);
    const after = query.after;
    if (after) {
      select = select.where((eb) =>
        eb.or([
          eb('issued_at', '<', after.issuedAt),
          eb.and([eb('issued_at', '=', after.issuedAt), eb('jti', '<', after.jti)]),
        ]),
      );
    }
    const rows = await select
      .orderBy('issued_at', 'desc')
      .orderBy('jti', 'desc')
      .limit(query.limit)
      .execute();
    return rows.map((r) => ({
      jti: r.jti,
      apiKeyId: r.api_key_id,
      issuedAt: r.issued_at,
      expiresAt: r.expires_at,
      revokedAt: r.revoked_at,
    }));
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

  /** True when a row exists for `jti` (tests: no credential is ever answered without one). */
  async exists(jti: string): Promise<boolean> {
    return (
      (await this.#db.selectFrom('credentials').select('jti').where('jti', '=', jti).executeTakeFirst()) !==
      undefined
    );
  }

  /**
   * Retention: deletes at most `limit` credentials that expired before `cutoff`, oldest expiry
   * first, with their revocation feed entries, in one statement (its own transaction). Returns
   * how many credentials went; fewer than `limit` means none is left before `cutoff`.
   *
   * Short locks only: the rows are chosen through credentials_expires_at and locked `skip
   * locked`, so a batch never waits for (nor blocks) a revocation updating one of them, and two
   * runs at once (a job run twice) delete disjoint rows. The feed entries go first in the same
   * statement: the foreign key from revocations is checked at its end. A relay whose cursor is
   * older than a deleted entry loses nothing it needs: the credential has expired.
   */
  async pruneExpired(cutoff: Date, limit: number): Promise<{ credentials: number; revocations: number }> {
    const credentials = sql.id(this.#schema, 'credentials');
    const revocations = sql.id(this.#schema, 'revocations');
    const result = await sql<{ credentials: string | number; revocations: string | number }>`
      with doomed as (
        select jti from ${credentials}
        where expires_at < ${cutoff.toISOString()}::timestamptz
        order by expires_at
        limit ${limit}
        for update skip locked
      ),
      feed as (
        delete from ${revocations} r using doomed d where r.jti = d.jti returning 1
      ),
      gone as (
        delete from ${credentials} c using doomed d where c.jti = d.jti returning 1
      )
      select (select count(*) from gone) as credentials, (select count(*) from feed) as revocations
    `.execute(this.#db);
    const row = result.rows[0];
    return { credentials: Number(row?.credentials ?? 0), revocations: Number(row?.revocations ?? 0) };
  }
}
