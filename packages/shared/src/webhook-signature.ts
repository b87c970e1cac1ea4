/**
 * Webhook signatures as the Standard Webhooks specification defines them (standardwebhooks.com;
 * issue 34): a receiver verifies a delivery with any Standard Webhooks library.
 *
 * - The secret is `whsec_` + base64 of random bytes; the HMAC key is the decoded bytes.
 * - The signed content is `<webhook-id>.<webhook-timestamp>.<body>`; each signature is
 *   `v1,<base64 HMAC-SHA256>`, and `webhook-signature` lists them space-separated: during a
 *   secret's rotation both the new and the previous secret sign, so a receiver holding either
 *   verifies.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** Random bytes in a new secret (the specification asks for 24 to 64). */
const SECRET_BYTES = 32;

/** A new signing secret: `whsec_` + base64 of 32 random bytes. Shown once; store it encrypted or hashed as its use allows. */
export function newWebhookSecret(): string {
  return `${WEBHOOK_SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The key bytes of a `whsec_` secret; undefined for anything else. */
export function webhookSecretKey(secret: string): Buffer | undefined {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) return undefined;
  const encoded = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return undefined;
  const key = Buffer.from(encoded, 'base64');
  return key.length >= 24 && key.length <= 64 ? key : undefined;
}

export interface WebhookHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The three headers of one delivery attempt of message `id` with `body` (the exact bytes sent),
 * signed at `timestampSeconds` by each of `secrets` (the current one first). Every retry of a
 * message carries the same `id`, so receivers deduplicate on it.
 */
export function webhookHeaders(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): WebhookHeaders {
  if (secrets.length === 0) throw new Error('a webhook delivery needs a signing secret');
  if (!Number.isSafeInteger(timestampSeconds)) throw new Error('webhook-timestamp must be whole seconds');
  const content = `${id}.${timestampSeconds}.${body}`;
  const signatures = secrets.map((secret) => {
    const key = webhookSecretKey(secret);
    if (!key) throw new Error('a webhook signing secret must be whsec_ and base64 of 24 to 64 bytes');
    return `v1,${createHmac('sha256', key).update(content).digest('base64')}`;
  });
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signatures.join(' '),
  };
}
