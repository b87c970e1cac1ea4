/**
 * Revoked signing keys in PostgreSQL (or PGlite): the `revoked_signing_keys` table
 * (migration 20261201T1000) and the one transaction that revokes a key.
 */
import { type ColumnType, type Kysely, sql } from 'kysely';
import type { IssuerDatabase } from '../db/schema.ts';
import { type KeyState, keyState } from '../keys/key-lifecycle.ts';
import { SigningKeyStore, type StoredKey } from '../keys/signing-key-store.ts';
import { REVOCATION_FEED_LOCK } from './revocation-feed-lock.ts';

export interface RevokedSigningKeysTable {
  kid: string;
  revoked_at: Date;
  /** Listed in the revocation feed until then: every credential the key signed has expired. */
  feed_until: Date;
  /** Taken from the revocation feed's sequence when the key was revoked. */
  sequence: ColumnType<string, string, never>;
  revoked_by: string;
}

/** The issuer schema with this module's table. */
export type RevocationDatabase = IssuerDatabase & { revoked_signing_keys: RevokedSigningKeysTable };

export interface RevokedKeyEntry {
  kid: string;
  revokedAt: Date;
  feedUntil: Date;
  /** Position in the revocation feed. */
  sequence: bigint;
}

export interface KeyRevocation {
  /** The key as it was before this call (revoked keys: as it is). */
  key: StoredKey;
  /** Its state before this call. */
  previousState: KeyState;
  revokedAt: Date;
  /** False when the key had been revoked before (nothing changed). */
  newly: boolean;
  /** The next key this call made active (the revoked key was the active one), if any. */
  promoted: string | null;
  /** Feed position of a new revocation. */
  sequence?: bigint;
}

/**
 * How long the revocation waits for its locks (the table lock waits for the credential inserts
 * under way): past it PostgreSQL cancels the statement (SQLSTATE 55P03) and nothing changed.
 */
export const KEY_REVOKE_LOCK_TIMEOUT_MS = 2_000;

export class SigningKeyRevocationStore {
  readonly #db: Kysely<RevocationDatabase>;
  readonly #schema: string;

  constructor(db: Kysely<IssuerDatabase>, schema = 'issuer') {
    this.#db = db as unknown as Kysely<RevocationDatabase>;
    this.#schema = schema;
  }

  /**
   * Revokes `kid` at `now` in one transaction; undefined when no key has that kid. Idempotent:
   * a revoked key answers its first `revoked_at` with `newly: false`.
   *
   * The transaction holds the signing keys' maintenance lock (a maintenance tick of another
   * replica waits for it, and sees its result), locks `credentials` in SHARE ROW EXCLUSIVE mode
   * (the credential inserts under way finish first, and every later one sees the revoked kid:
   * the writer refuses it, so no credential signed by the key is recorded, so answered, after
   * the commit), then the feed's lock. It takes the key out of the JWKS and wipes its private
   * half; when it was the active key, the oldest next key becomes active at once (an
   * emergency does not wait for the next key's eligibility; with no next key, none is active
   * until the caller's maintenance tick creates one). The row of `revoked_signing_keys` takes a
   * feed sequence, so the feed's cursor moves. `inTransaction` runs last in the same
   * transaction (the audit outbox row): if it throws, nothing changed.
   */
  async revoke(
    input: { kid: string; now: Date; feedUntil: Date; revokedBy: string },
    inTransaction?: (trx: Kysely<IssuerDatabase>, revocation: KeyRevocation) => Promise<unknown>,
  ): Promise<KeyRevocation | undefined> {
    const { kid, now } = input;
    return new SigningKeyStore(this.#db as unknown as Kysely<IssuerDatabase>).locked(async (keys, trx) => {
      const tx = trx as unknown as Kysely<RevocationDatabase>;
      const key = await keys.get(kid);
      if (!key) return undefined;
      const earlier = await tx
        .selectFrom('revoked_signing_keys')
        .select('revoked_at')
        .where('kid', '=', kid)
        .executeTakeFirst();
      if (earlier) {
        return {
          key,
          previousState: keyState(key),
          revokedAt: earlier.revoked_at,
          newly: false,
          promoted: null,
        };
      }
      await sql`select set_config('lock_timeout', ${`${KEY_REVOKE_LOCK_TIMEOUT_MS}ms`}, true)`.execute(trx);
      await sql`lock table ${sql.id(this.#schema, 'credentials')} in share row exclusive mode`.execute(trx);
      await sql`select pg_advisory_xact_lock(${REVOCATION_FEED_LOCK})`.execute(trx);
      const previousState = keyState(key);
      let promoted: string | null = null;
      if (previousState === 'active') {
        // Deactivated with nothing left to wait for: its credentials are refused from now on.
        await keys.deactivate(kid, now, now);
        const next = (await keys.listLive())
          .filter((k) => keyState(k) === 'next')
          .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())[0];
        if (next) {
          await keys.activate(next.kid, now);
          promoted = next.kid;
        }
      }
      if (previousState !== 'removed') await keys.remove(kid, now);
      const seq = sql<string>`nextval(pg_get_serial_sequence(${`"${this.#schema}".revocations`}, 'sequence'))`;
      const row = await tx
        .insertInto('revoked_signing_keys')
        .values({
          kid,
          revoked_at: now,
          feed_until: input.feedUntil,
          sequence: seq as unknown as string,
          revoked_by: input.revokedBy,
        })
        .returning('sequence')
        .executeTakeFirstOrThrow();
      const revocation: KeyRevocation = {
        key,
        previousState,
        revokedAt: now,
        newly: true,
        promoted,
        sequence: BigInt(row.sequence),
      };
      await inTransaction?.(trx, revocation);
      return revocation;
    });
  }

  /** The revocations the feed still lists at `now` (`feed_until` after it), oldest first. */
  async inFeed(now: Date): Promise<RevokedKeyEntry[]> {
    const rows = await this.#db
      .selectFrom('revoked_signing_keys')
      .select(['kid', 'revoked_at', 'feed_until', 'sequence'])
      .where('feed_until', '>', now)
      .orderBy('sequence')
      .execute();
    return rows.map((r) => ({
      kid: r.kid,
      revokedAt: r.revoked_at,
      feedUntil: r.feed_until,
      sequence: BigInt(r.sequence),
    }));
  }

  /** When `kid` was revoked; undefined when it never was. */
  async revokedAt(kid: string): Promise<Date | undefined> {
    const row = await this.#db
      .selectFrom('revoked_signing_keys')
      .select('revoked_at')
      .where('kid', '=', kid)
      .executeTakeFirst();
    return row?.revoked_at;
  }
}
