/**
 * Device tokens (OWASP, "Slow down online guessing attacks with device cookies"): a login that
 * succeeds gives its client a token naming the user and a random nonce, signed with a key only
 * admin holds. A later login presenting a valid token for the same user is a client that has
 * logged in before: it is counted against its own limit (`login:device:<nonce>`) and never
 * refused by the account-wide one, so an attacker's failures from elsewhere cannot lock the
 * owner's known devices out (docs/iam.md, "Login throttling").
 *
 * Format: `<payload>.<mac>`, both base64url; payload = JSON `{u: user id, n: nonce, e: expiry
 * (unix seconds)}`, mac = HMAC-SHA256 over the payload's text under a key derived from the KEK
 * (HKDF-SHA256, its own label, so it equals no other use of the KEK). Not a credential: it opens
 * nothing, it only changes which throttle counts a login.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** How long a device stays known after its last successful login. */
export const DEVICE_TOKEN_TTL_SECONDS = 180 * 24 * 60 * 60;
const HKDF_INFO = 'relayplane/login-device-token/v1';
/** Longer than any token we mint (~130 characters): not ours, not parsed. */
const MAX_LENGTH = 512;

export interface KnownDevice {
  /** Random, 128 bits, base64url: the device's throttle key. */
  nonce: string;
  /** The token as presented (answered again: the device keeps its nonce). */
  token: string;
}

export class DeviceTokens {
  readonly #key: Buffer;

  constructor(kek: Buffer) {
    this.#key = Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), HKDF_INFO, 32));
  }

  /** A new token for `userId`. */
  mint(userId: string, now: Date): KnownDevice {
    const nonce = randomBytes(16).toString('base64url');
    const expires = Math.floor(now.getTime() / 1000) + DEVICE_TOKEN_TTL_SECONDS;
    const payload = Buffer.from(JSON.stringify({ u: userId, n: nonce, e: expires })).toString('base64url');
    return { nonce, token: `${payload}.${this.#mac(payload)}` };
  }

  /** The device, when `token` is one we minted for `userId` and it has not expired; else undefined. */
  verify(token: string, userId: string, now: Date): KnownDevice | undefined {
    if (token === '' || token.length > MAX_LENGTH) return undefined;
    const [payload, mac, extra] = token.split('.');
    if (payload === undefined || mac === undefined || extra !== undefined) return undefined;
    const expected = Buffer.from(this.#mac(payload));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    let claims: unknown;
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    if (typeof claims !== 'object' || claims === null) return undefined;
    const { u, n, e } = claims as { u?: unknown; n?: unknown; e?: unknown };
    if (u !== userId || typeof n !== 'string' || typeof e !== 'number') return undefined;
    if (e * 1000 <= now.getTime()) return undefined;
    return { nonce: n, token };
  }

  #mac(payload: string): string {
    return createHmac('sha256', this.#key).update(payload).digest('base64url');
  }
}
