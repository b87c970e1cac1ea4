/**
 * TOTP secrets at rest: AES-256-GCM under a key derived from the KEK (HKDF-SHA256 with its own
 * label, so it equals neither the KEK nor any other key derived from it), a random 96-bit IV, a
 * 16-byte tag (required on opening: `authTagLength`), and the user id as associated data, so a
 * sealed secret copied onto another user's row does not open. Sealed under the current KEK;
 * opened under it or any previous one (`RELAYPLANE_KEK_PREVIOUS`) while a rotation runs, and
 * re-sealed under the current one by jobs/reseal-totp-secrets.ts.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const HKDF_INFO = 'relayplane/totp-secret/v1';
const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The HKDF label of webhook signing secrets (issue 34): their own key, with the endpoint id as AAD. */
export const WEBHOOK_SECRET_HKDF_INFO = 'relayplane/webhook-secret/v1';

function deriveKey(kek: Buffer, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), info, 32));
}

export class SecretSealer {
  readonly #current: Buffer;
  readonly #all: Buffer[];

  /** `info`: the HKDF label of what is sealed (default: TOTP secrets, the user id as AAD). */
  constructor(kek: Buffer, previous: readonly Buffer[] = [], info = HKDF_INFO) {
    this.#current = deriveKey(kek, info);
    this.#all = [this.#current, ...previous.map((k) => deriveKey(k, info))];
  }

  seal(secret: Buffer, userId: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(userId));
    const ciphertext = Buffer.concat([cipher.update(secret), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), ciphertext].map((b) => b.toString('base64url'));
    return [VERSION, ...parts].join('.');
  }

  /** The secret, or undefined when it does not open under any KEK (tampered, another user's, another key). */
  open(sealed: string, userId: string): Buffer | undefined {
    return this.#opening(sealed, userId)?.secret;
  }

  /**
   * `sealed` again under the current KEK when only a previous one opens it (`resealed`);
   * `current` when the current KEK opens it, `unopened` when no configured KEK does.
   */
  reseal(
    sealed: string,
    userId: string,
  ): { state: 'current' } | { state: 'resealed'; sealed: string } | { state: 'unopened' } {
    const opened = this.#opening(sealed, userId);
    if (!opened) return { state: 'unopened' };
    if (opened.key === this.#current) return { state: 'current' };
    return { state: 'resealed', sealed: this.seal(opened.secret, userId) };
  }

  #opening(sealed: string, userId: string): { secret: Buffer; key: Buffer } | undefined {
    const [version, iv, tag, ciphertext, extra] = sealed.split('.');
    if (version !== VERSION || !iv || !tag || !ciphertext || extra !== undefined) return undefined;
    const ivBytes = Buffer.from(iv, 'base64url');
    const tagBytes = Buffer.from(tag, 'base64url');
    if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) return undefined;
    for (const key of this.#all) {
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, ivBytes, { authTagLength: TAG_BYTES });
        decipher.setAAD(Buffer.from(userId));
        decipher.setAuthTag(tagBytes);
        const secret = Buffer.concat([
          decipher.update(Buffer.from(ciphertext, 'base64url')),
          decipher.final(),
        ]);
        return { secret, key };
      } catch {
        // the next KEK
      }
    }
    return undefined;
  }
}
