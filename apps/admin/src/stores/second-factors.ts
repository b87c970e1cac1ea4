/**
 * Second factors in PostgreSQL (migration 20261203T1200): a user's TOTP enrolment, their
 * recovery codes, and the tenant's `require_mfa`. Every "use once" is one conditional statement,
 * so two concurrent uses of a code cannot both pass.
 */
import { type Kysely, sql, type Transaction } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';

export interface TotpEnrolment {
  sealedSecret: string;
  status: 'pending' | 'confirmed';
  createdAt: Date;
  confirmedAt: Date | null;
  lastStep: number | null;
}

type Db = Kysely<AdminDatabase> | Transaction<AdminDatabase>;

/** The user's recovery codes become exactly `codeHashes` (used or not, the earlier ones go). */
async function writeRecoveryCodes(
  db: Transaction<AdminDatabase>,
  userId: string,
  codeHashes: readonly string[],
  now: Date,
): Promise<void> {
  await db.deleteFrom('user_recovery_codes').where('user_id', '=', userId).execute();
  await db
    .insertInto('user_recovery_codes')
    .values(codeHashes.map((code_hash) => ({ user_id: userId, code_hash, created_at: now })))
    .execute();
}

export class SecondFactorStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  async find(userId: string, db: Db = this.#db): Promise<TotpEnrolment | undefined> {
    const row = await db.selectFrom('user_totp').selectAll().where('user_id', '=', userId).executeTakeFirst();
    if (!row) return undefined;
    return {
      sealedSecret: row.sealed_secret,
      status: row.status === 'confirmed' ? 'confirmed' : 'pending',
      createdAt: row.created_at,
      confirmedAt: row.confirmed_at,
      lastStep: row.last_step === null ? null : Number(row.last_step),
    };
  }

  async isEnrolled(userId: string): Promise<boolean> {
    const row = await this.#db
      .selectFrom('user_totp')
      .select('user_id')
      .where('user_id', '=', userId)
      .where('status', '=', 'confirmed')
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * A pending enrolment with this sealed secret, replacing a pending one; `'enrolled'` when the
   * user already has a confirmed one (disable it first).
   */
  async start(
    userId: string,
    sealedSecret: string,
    now: Date,
    db: Db = this.#db,
  ): Promise<'started' | 'enrolled'> {
    const row = await db
      .insertInto('user_totp')
      .values({ user_id: userId, sealed_secret: sealedSecret, status: 'pending', created_at: now })
      .onConflict((oc) =>
        oc
          .column('user_id')
          .doUpdateSet({ sealed_secret: sealedSecret, created_at: now, last_step: null })
          .where('user_totp.status', '=', 'pending'),
      )
      .returning('user_id')
      .executeTakeFirst();
    return row ? 'started' : 'enrolled';
  }

  /**
   * Confirms the pending enrolment whose sealed secret is `sealedSecret` (the one the code was
   * checked against: a restart in between wins), recording `step` as used, and replaces the
   * user's recovery codes with `codeHashes`. False when there is no such pending enrolment.
   */
  async confirm(
    userId: string,
    sealedSecret: string,
    step: number,
    codeHashes: readonly string[],
    now: Date,
    db: Transaction<AdminDatabase>,
  ): Promise<boolean> {
    const res = await db
      .updateTable('user_totp')
      .set({ status: 'confirmed', confirmed_at: now, last_step: String(step) })
      .where('user_id', '=', userId)
      .where('status', '=', 'pending')
      .where('sealed_secret', '=', sealedSecret)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) return false;
    await writeRecoveryCodes(db, userId, codeHashes, now);
    return true;
  }

  /**
   * Takes time step `step` of the confirmed enrolment whose sealed secret is `sealedSecret` (the
   * one the code was checked against: a removal and a new enrolment in between win), once: false
   * when it (or a later one) was used.
   */
  async useStep(userId: string, sealedSecret: string, step: number): Promise<boolean> {
    const res = await this.#db
      .updateTable('user_totp')
      .set({ last_step: String(step) })
      .where('user_id', '=', userId)
      .where('status', '=', 'confirmed')
      .where('sealed_secret', '=', sealedSecret)
      .where((eb) => eb.or([eb('last_step', 'is', null), eb('last_step', '<', String(step))]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** A page of confirmed enrolments' sealed secrets, by user id after `afterUserId` (re-sealing). */
  async listConfirmedSealed(
    afterUserId: string,
    limit: number,
  ): Promise<{ userId: string; sealedSecret: string }[]> {
    const rows = await this.#db
      .selectFrom('user_totp')
      .select(['user_id', 'sealed_secret'])
      .where('status', '=', 'confirmed')
      .where('user_id', '>', afterUserId)
      .orderBy('user_id')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ userId: r.user_id, sealedSecret: r.sealed_secret }));
  }

  /** Replaces a confirmed enrolment's sealed secret, only while it is still `from` (compare and set). */
  async replaceSealed(userId: string, from: string, to: string): Promise<boolean> {
    const res = await this.#db
      .updateTable('user_totp')
      .set({ sealed_secret: to })
      .where('user_id', '=', userId)
      .where('status', '=', 'confirmed')
      .where('sealed_secret', '=', from)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /**
   * Replaces the user's recovery codes (used or not) with `codeHashes`, while a confirmed
   * enrolment exists (its row locked until the transaction ends, so a removal waits); false
   * when there is none.
   */
  async replaceRecoveryCodes(
    userId: string,
    codeHashes: readonly string[],
    now: Date,
    db: Transaction<AdminDatabase>,
  ): Promise<boolean> {
    const enrolled = await db
      .selectFrom('user_totp')
      .select('user_id')
      .where('user_id', '=', userId)
      .where('status', '=', 'confirmed')
      .forUpdate()
      .executeTakeFirst();
    if (!enrolled) return false;
    await writeRecoveryCodes(db, userId, codeHashes, now);
    return true;
  }

  /** Uses an unused recovery code, once: false when unknown or used. */
  async useRecoveryCode(userId: string, codeHash: string, now: Date): Promise<boolean> {
    const res = await this.#db
      .updateTable('user_recovery_codes')
      .set({ used_at: now })
      .where('user_id', '=', userId)
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  async recoveryCodesLeft(userId: string): Promise<number> {
    const row = await this.#db
      .selectFrom('user_recovery_codes')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('user_id', '=', userId)
      .where('used_at', 'is', null)
      .executeTakeFirstOrThrow();
    return row.n;
  }

  /** Removes the enrolment (pending or confirmed) and the recovery codes; true when one existed. */
  async remove(userId: string, db: Transaction<AdminDatabase>): Promise<boolean> {
    const res = await db.deleteFrom('user_totp').where('user_id', '=', userId).executeTakeFirst();
    await db.deleteFrom('user_recovery_codes').where('user_id', '=', userId).execute();
    return Number(res.numDeletedRows) > 0;
  }

  async requireMfa(tenantId: string): Promise<boolean> {
    const row = await this.#db
      .selectFrom('tenants')
      .select('require_mfa')
      .where('id', '=', tenantId)
      .executeTakeFirst();
    return row?.require_mfa ?? false;
  }

  async setRequireMfa(tenantId: string, requireMfa: boolean, db: Transaction<AdminDatabase>): Promise<void> {
    await db.updateTable('tenants').set({ require_mfa: requireMfa }).where('id', '=', tenantId).execute();
  }
}
