/**
 * Password hashing with argon2id at the OWASP-recommended parameters (19 MiB, t=2, p=1).
 * Hashes are PHC strings, so parameters can be raised later without invalidating old hashes.
 */
import { randomBytes } from 'node:crypto';
import argon2 from 'argon2';

const OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  /** False for a wrong password or an unusable hash; never throws for either. */
  verify(hash: string, password: string): Promise<boolean>;
  /**
   * Does the work of one verification and answers false: used when the account does not
   * exist, so an unknown email costs as much as a wrong password.
   */
  verifyNobody(password: string): Promise<false>;
}

export async function createPasswordHasher(): Promise<PasswordHasher> {
  const dummy = await argon2.hash(randomBytes(32).toString('hex'), OPTIONS);
  const verify = async (hash: string, password: string) => {
    try {
      return await argon2.verify(hash, password);
    } catch {
      return false;
    }
  };
  return {
    hash: (password) => argon2.hash(password, OPTIONS),
    verify,
    async verifyNobody(password) {
      await verify(dummy, password);
      return false;
    },
  };
}
