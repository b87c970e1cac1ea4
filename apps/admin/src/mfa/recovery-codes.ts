/**
 * Recovery codes: ten per enrolment, each used once, shown once, stored as SHA-256. Twelve
 * characters from an alphabet without look-alikes (no 0/o, 1/l/i), grouped `xxxx-xxxx-xxxx`:
 * about 61 bits each, so a hash without salt or KDF is enough (nobody can enumerate them), and
 * every attempt is throttled like a password anyway.
 */
import { createHash, randomInt } from 'node:crypto';

export const RECOVERY_CODE_COUNT = 10;
const ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
const LENGTH = 12;

export function newRecoveryCode(): string {
  let code = '';
  for (let i = 0; i < LENGTH; i++) code += ALPHABET[randomInt(ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4, 8)}-${code.slice(8)}`;
}

/** The code as typed, lowercased without spaces or dashes; undefined when it cannot be one. */
export function normaliseRecoveryCode(input: string): string | undefined {
  const code = input.toLowerCase().replace(/[\s-]/g, '');
  if (code.length !== LENGTH) return undefined;
  for (const ch of code) if (!ALPHABET.includes(ch)) return undefined;
  return code;
}

export function hashRecoveryCode(normalised: string): string {
  return createHash('sha256').update(normalised).digest('hex');
}

/** A fresh set: the codes to show once, and their hashes to store. */
export function newRecoveryCodeSet(): { codes: string[]; hashes: string[] } {
  const codes = Array.from({ length: RECOVERY_CODE_COUNT }, newRecoveryCode);
  return { codes, hashes: codes.map((c) => hashRecoveryCode(c.replaceAll('-', ''))) };
}
