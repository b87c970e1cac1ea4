import { createHash, randomBytes } from 'node:crypto';

/** Every id prefix in the system, in one place. */
export const ID_PREFIXES = {
  tenant: 'ten',
  user: 'usr',
  project: 'prj',
  session: 'ses',
  bot: 'bot',
  apiKey: 'key',
  relay: 'rly',
  allowlistEntry: 'alw',
  checkoutSession: 'cks',
  identityToken: 'idt',
  /** A webhook message: its `id` and `webhook-id`, the same on every retry (issue 34). */
  webhookMessage: 'msg',
  /** A project's webhook endpoint. */
  webhookEndpoint: 'whk',
  /** One message's delivery to one endpoint (its attempts). */
  webhookDelivery: 'dlv',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

// 32 symbols divide 256 evenly, so every symbol is equally likely.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** `prj_` + 20 random base32 characters (100 bits): unguessable and URL-safe. */
export function newId(kind: IdKind): string {
  const bytes = randomBytes(20);
  let out = '';
  for (const b of bytes) out += ALPHABET[b & 31];
  return `${ID_PREFIXES[kind]}_${out}`;
}

/**
 * The id of `kind` that `seed` always gives (the first 100 bits of its SHA-256): for a record
 * that must be the same however often it is derived (a webhook message of an event delivered
 * twice). Unguessable only as far as the seed is.
 */
export function derivedId(kind: IdKind, seed: string): string {
  const bytes = createHash('sha256').update(seed).digest().subarray(0, 20);
  let out = '';
  for (const b of bytes) out += ALPHABET[b & 31];
  return `${ID_PREFIXES[kind]}_${out}`;
}

const ID_PATTERN = /^[a-z]{3}_[0-9a-z]{20}$/;

export function isId(kind: IdKind, value: string): boolean {
  return ID_PATTERN.test(value) && value.startsWith(`${ID_PREFIXES[kind]}_`);
}
