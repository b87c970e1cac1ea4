/**
 * Login challenges: the password step of a user with a second factor (grpc/login.ts). Only the
 * SHA-256 of the `mfa_token` is stored. A challenge lives a few minutes, allows a few wrong codes,
 * and is taken (deleted) by the one correct code, so it opens at most one session.
 */
import type { Kysely } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';

export interface LoginChallenge {
  userId: string;
  tenantId: string;
  passwordHash: string;
  credentialsEpoch: number;
  deviceNonce: string | null;
  failedAttempts: number;
  expiresAt: Date;
}

export class LoginChallengeStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  async create(
    tokenHash: string,
    challenge: Omit<LoginChallenge, 'failedAttempts'>,
    now: Date,
  ): Promise<void> {
    await this.#db
      .insertInto('login_challenges')
      .values({
        token_hash: tokenHash,
        user_id: challenge.userId,
        tenant_id: challenge.tenantId,
        password_hash: challenge.passwordHash,
        credentials_epoch: challenge.credentialsEpoch,
        device_nonce: challenge.deviceNonce,
        created_at: now,
        expires_at: challenge.expiresAt,
      })
      .execute();
  }

  /** The unexpired challenge with fewer than `maxFailures` wrong codes, without taking it. */
  async find(tokenHash: string, now: Date, maxFailures: number): Promise<LoginChallenge | undefined> {
    const row = await this.#db
      .selectFrom('login_challenges')
      .selectAll()
      .where('token_hash', '=', tokenHash)
      .where('expires_at', '>', now)
      .where('failed_attempts', '<', maxFailures)
      .executeTakeFirst();
    return row && toChallenge(row);
  }

  /** Takes the challenge (one caller only): true when this call deleted it. */
  async take(tokenHash: string, now: Date): Promise<boolean> {
    const res = await this.#db
      .deleteFrom('login_challenges')
      .where('token_hash', '=', tokenHash)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /** Counts a wrong code. */
  async fail(tokenHash: string): Promise<void> {
    await this.#db
      .updateTable('login_challenges')
      .set((eb) => ({ failed_attempts: eb('failed_attempts', '+', 1) }))
      .where('token_hash', '=', tokenHash)
      .execute();
  }

  /** Removes challenges that expired before `now`; returns how many. */
  async deleteExpired(now: Date): Promise<number> {
    const res = await this.#db
      .deleteFrom('login_challenges')
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}

function toChallenge(row: {
  user_id: string;
  tenant_id: string;
  password_hash: string;
  credentials_epoch: number;
  device_nonce: string | null;
  failed_attempts: number;
  expires_at: Date;
}): LoginChallenge {
  return {
    userId: row.user_id,
    tenantId: row.tenant_id,
    passwordHash: row.password_hash,
    credentialsEpoch: row.credentials_epoch,
    deviceNonce: row.device_nonce,
    failedAttempts: row.failed_attempts,
    expiresAt: row.expires_at,
  };
}
