/**
 * TOTP (RFC 6238 over RFC 4226's HOTP): HMAC-SHA-1, 6 digits, 30-second steps, a code of the
 * current step or one step either side accepted. Pure: the caller keeps which step was last
 * accepted (a code is accepted once). node:crypto's HMAC is all it needs.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const TOTP_PERIOD_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** Steps either side of the current one a code may come from (clock drift). */
export const TOTP_WINDOW = 1;
/** 160-bit secrets, as RFC 4226 recommends for HMAC-SHA-1. */
const SECRET_BYTES = 20;
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export function newTotpSecret(): Buffer {
  return randomBytes(SECRET_BYTES);
}

/** RFC 4648 base32 without padding: what authenticator apps take. */
export function base32(bytes: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** HOTP (RFC 4226 §5.3) of `counter`, `digits` long. */
export function hotp(secret: Buffer, counter: number, digits = TOTP_DIGITS): string {
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac('sha1', secret).update(message).digest();
  const offset = (mac[mac.length - 1] ?? 0) & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return (binary % 10 ** digits).toString().padStart(digits, '0');
}

export function stepAt(now: Date): number {
  return Math.floor(now.getTime() / 1000 / TOTP_PERIOD_SECONDS);
}

/**
 * The time step whose code `code` is (the current one, or one either side), or undefined.
 * Every candidate is computed and compared, so the time taken does not say which step matched.
 */
export function matchingStep(secret: Buffer, code: string, now: Date): number | undefined {
  if (!/^\d{6}$/.test(code)) return undefined;
  const current = stepAt(now);
  let found: number | undefined;
  for (let step = current - TOTP_WINDOW; step <= current + TOTP_WINDOW; step++) {
    if (hotp(secret, step) === code && found === undefined) found = step;
  }
  return found;
}

/** The `otpauth://` URI authenticator apps scan (Key Uri Format). */
export function otpauthUri(secret: Buffer, account: string, issuer = 'Relayplane'): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(account)}`;
  const params = new URLSearchParams({
    secret: base32(secret),
    issuer,
    algorithm: 'SHA1',
    digits: String(TOTP_DIGITS),
    period: String(TOTP_PERIOD_SECONDS),
  });
  return `otpauth://totp/${label}?${params}`;
}
