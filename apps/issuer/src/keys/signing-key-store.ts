import { type Kysely, type Selectable, sql } from 'kysely';
import type { Bytes, IssuerDatabase, SigningKeysTable } from '../db/schema.ts';
import { type KeyTimeline, STATE_ORDER } from './key-lifecycle.ts';
import type { SealedPrivateKey } from './key-material.ts';

export interface StoredKey extends KeyTimeline {
  x: string;
  kekFingerprint: string;
  /** Null once the key is removed (its private half is wiped). */
  sealed: SealedPrivateKey | null;
}

export interface NewKey {
  kid: string;
  x: string;
  kekFingerprint: string;
  sealed: SealedPrivateKey;
  createdAt: Date;
  activatedAt: Date | null;
}

export interface RotationRequest {
  requestedAt: Date;
  requestedBy: string;
}

// Any constant works: every issuer replica of one database takes the same lock.
const MAINTENANCE_LOCK = sql`hashtext('relayplane.issuer.signing-keys')`;

function toBuffer(bytes: Bytes): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function toStoredKey(row: Selectable<SigningKeysTable>): StoredKey {
  const { private_iv: iv, private_ciphertext: ciphertext, private_tag: tag } = row;
  return {
    kid: row.kid,
    x: row.x,
    kekFingerprint: row.kek_fingerprint,
    sealed:
      iv && ciphertext && tag
        ? { iv: toBuffer(iv), ciphertext: toBuffer(ciphertext), tag: toBuffer(tag) }
        : null,
    createdAt: row.created_at,
    activatedAt: row.activated_at,
    deactivatedAt: row.deactivated_at,
    removeAfter: row.remove_after,
    removedAt: row.removed_at,
  };
}

/** Where a page of the key listing ended: the last key's sort values (`listPage`). */
export interface KeyListPosition {
  /** `STATE_ORDER` of its state. */
  rank: number;
  /** Its latest change: removed, else deactivated, else activated, else created. */
  changedAt: Date;
  createdAt: Date;
  kid: string;
}

/** The listing's order of states (`compareKeys`), as SQL sees them. */
const KEY_RANK = sql<number>`(case when removed_at is not null then ${sql.lit(STATE_ORDER.removed)}
  when deactivated_at is not null then ${sql.lit(STATE_ORDER.previous)}
  when activated_at is not null then ${sql.lit(STATE_ORDER.active)} else ${sql.lit(STATE_ORDER.next)} end)`;
const KEY_CHANGED_AT = sql<Date>`coalesce(removed_at, deactivated_at, activated_at, created_at)`;
// Code-unit order, as `compareKeys` compares kids, whatever the database's collation.
const KID_BYTES = sql<string>`(kid collate "C")`;

/** Signing keys and the pending rotation request in PostgreSQL (or PGlite). */
export class SigningKeyStore {
  readonly #db: Kysely<IssuerDatabase>;
  constructor(db: Kysely<IssuerDatabase>) {
    this.#db = db;
  }

  /**
   * Runs `fn` in one transaction holding the maintenance advisory lock, so replicas
   * ticking at the same moment take turns and each sees the other's result.
   */
  async locked<T>(fn: (store: SigningKeyStore, trx: Kysely<IssuerDatabase>) => Promise<T>): Promise<T> {
    return this.#db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${MAINTENANCE_LOCK})`.execute(trx);
      return fn(new SigningKeyStore(trx), trx);
    });
  }

  /** Every key, removed ones included. */
  async list(): Promise<StoredKey[]> {
    const rows = await this.#db.selectFrom('signing_keys').selectAll().orderBy('created_at').execute();
    return rows.map(toStoredKey);
  }

  /**
   * At most `limit` keys in listing order (`compareKeys`: active, next, previous, removed;
   * within a state the latest change first, then the newest, then by kid), after `after`
   * (where the previous page ended). Removed keys stay forever, one per rotation: the page is
   * cut here rather than after reading them all.
   */
  async listPage(limit: number, after?: KeyListPosition): Promise<StoredKey[]> {
    let query = this.#db
      .selectFrom('signing_keys')
      .selectAll()
      .orderBy(KEY_RANK)
      .orderBy(KEY_CHANGED_AT, 'desc')
      .orderBy('created_at', 'desc')
      .orderBy(KID_BYTES)
      .limit(limit);
    if (after) {
      const { rank, changedAt, createdAt, kid } = after;
      query = query.where(
        sql<boolean>`(${KEY_RANK} > ${rank} or (${KEY_RANK} = ${rank} and (${KEY_CHANGED_AT} < ${changedAt}
          or (${KEY_CHANGED_AT} = ${changedAt} and (created_at < ${createdAt}
          or (created_at = ${createdAt} and ${KID_BYTES} > ${kid}))))))`,
      );
    }
    return (await query.execute()).map(toStoredKey);
  }

  /** Keys still in the JWKS. */
  async listLive(): Promise<StoredKey[]> {
    const rows = await this.#db
      .selectFrom('signing_keys')
      .selectAll()
      .where('removed_at', 'is', null)
      .orderBy('created_at')
      .execute();
    return rows.map(toStoredKey);
  }

  async get(kid: string): Promise<StoredKey | undefined> {
    const row = await this.#db
      .selectFrom('signing_keys')
      .selectAll()
      .where('kid', '=', kid)
      .executeTakeFirst();
    return row && toStoredKey(row);
  }

  /** Fingerprints of the KEKs that sealed the private halves still stored. */
  async kekFingerprints(): Promise<string[]> {
    const rows = await this.#db
      .selectFrom('signing_keys')
      .select('kek_fingerprint')
      .distinct()
      .where('private_ciphertext', 'is not', null)
      .execute();
    return rows.map((r) => r.kek_fingerprint);
  }

  /**
   * Replaces a key's sealed private half with one sealed under another KEK, only if the row is
   * still sealed by `from` (compare-and-set on the fingerprint, one UPDATE): of two replicas
   * re-encrypting the same key, exactly one succeeds. False when the row had changed (already
   * re-encrypted, or removed).
   */
  async reseal(
    kid: string,
    from: string,
    to: { kekFingerprint: string; sealed: SealedPrivateKey },
  ): Promise<boolean> {
    const result = await this.#db
      .updateTable('signing_keys')
      .set({
        kek_fingerprint: to.kekFingerprint,
        private_iv: to.sealed.iv,
        private_ciphertext: to.sealed.ciphertext,
        private_tag: to.sealed.tag,
      })
      .where('kid', '=', kid)
      .where('kek_fingerprint', '=', from)
      .where('removed_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async insert(key: NewKey): Promise<void> {
    await this.#db
      .insertInto('signing_keys')
      .values({
        kid: key.kid,
        x: key.x,
        kek_fingerprint: key.kekFingerprint,
        private_iv: key.sealed.iv,
        private_ciphertext: key.sealed.ciphertext,
        private_tag: key.sealed.tag,
        created_at: key.createdAt,
        activated_at: key.activatedAt,
      })
      .execute();
  }

  async activate(kid: string, at: Date): Promise<void> {
    await this.#db
      .updateTable('signing_keys')
      .set({ activated_at: at })
      .where('kid', '=', kid)
      .where('activated_at', 'is', null)
      .execute();
  }

  async deactivate(kid: string, at: Date, removeAfter: Date): Promise<void> {
    await this.#db
      .updateTable('signing_keys')
      .set({ deactivated_at: at, remove_after: removeAfter })
      .where('kid', '=', kid)
      .where('deactivated_at', 'is', null)
      .execute();
  }

  /** Takes the key out of the JWKS and wipes its private half; the row stays for audit. */
  async remove(kid: string, at: Date): Promise<void> {
    await this.#db
      .updateTable('signing_keys')
      .set({ removed_at: at, private_iv: null, private_ciphertext: null, private_tag: null })
      .where('kid', '=', kid)
      .where('removed_at', 'is', null)
      .execute();
  }

  async rotationRequest(): Promise<RotationRequest | undefined> {
    const row = await this.#db
      .selectFrom('rotation_requests')
      .select(['requested_at', 'requested_by'])
      .executeTakeFirst();
    return row && { requestedAt: row.requested_at, requestedBy: row.requested_by };
  }

  /** Records an on-demand rotation; an earlier pending request keeps its time. */
  async requestRotation(at: Date, requestedBy: string): Promise<void> {
    await this.#db
      .insertInto('rotation_requests')
      .values({ id: 1, requested_at: at, requested_by: requestedBy })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  }

  async clearRotationRequest(): Promise<void> {
    await this.#db.deleteFrom('rotation_requests').execute();
  }
}
