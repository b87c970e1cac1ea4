/**
 * Ed25519 key material and its encryption at rest.
 *
 * The private half is stored only as PKCS#8 DER sealed with AES-256-GCM under the
 * key-encryption key (KEK); the kid is the additional authenticated data, so a sealed
 * key cannot be swapped onto another row without failing to open. Each row names the KEK
 * that sealed it by fingerprint, so during a KEK rotation (`KekSet`) the right one opens it.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import { calculateJwkThumbprint } from 'jose';

export const KEK_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The public JWK of a signing key, fields in publication order. */
export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

export interface SealedPrivateKey {
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

export interface GeneratedKey {
  kid: string;
  x: string;
  privateKey: KeyObject;
}

/** RFC 7638 thumbprint (SHA-256, base64url) of an Ed25519 public key. */
async function ed25519Thumbprint(x: string): Promise<string> {
  return calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x }, 'sha256');
}

export async function generateSigningKey(): Promise<GeneratedKey> {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const x = publicX(publicKey);
  return { kid: await ed25519Thumbprint(x), x, privateKey };
}

export function publicJwk(kid: string, x: string): PublicJwk {
  return { kty: 'OKP', crv: 'Ed25519', x, kid, alg: 'EdDSA', use: 'sig' };
}

function publicX(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' });
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new Error('not an Ed25519 key');
  }
  return jwk.x;
}

/**
 * Identifies a KEK without revealing it: the first 16 hex digits of the SHA-256 of its 32
 * bytes (`printf %s "$KEK" | base64 -d | sha256sum | cut -c1-16`, as deploy/README.md shows
 * operators). Every row has carried it since the first migration, so it is kept as it is.
 */
export function kekFingerprint(kek: Buffer): string {
  return createHash('sha256').update(kek).digest('hex').slice(0, 16);
}

/**
 * The configured KEKs: the current one (`RELAYPLANE_KEK`) seals every key written from now on;
 * it and the previous ones (`RELAYPLANE_KEK_PREVIOUS`) each open what they sealed, picked by
 * the fingerprint the row records.
 */
export class KekSet {
  readonly current: Buffer;
  readonly currentFingerprint: string;
  /** Fingerprints of the previous KEKs, in configuration order (the current one left out). */
  readonly previousFingerprints: readonly string[];
  readonly #byFingerprint = new Map<string, Buffer>();

  constructor(current: Buffer, previous: readonly Buffer[] = []) {
    assertKek(current);
    this.current = current;
    this.currentFingerprint = kekFingerprint(current);
    this.#byFingerprint.set(this.currentFingerprint, current);
    const fingerprints: string[] = [];
    for (const kek of previous) {
      assertKek(kek);
      const fingerprint = kekFingerprint(kek);
      if (this.#byFingerprint.has(fingerprint)) continue;
      this.#byFingerprint.set(fingerprint, kek);
      fingerprints.push(fingerprint);
    }
    this.previousFingerprints = fingerprints;
  }

  /** The configured KEK with this fingerprint, or undefined. */
  byFingerprint(fingerprint: string): Buffer | undefined {
    return this.#byFingerprint.get(fingerprint);
  }

  /** Opens a key sealed under any configured KEK; throws `KeyDecryptionError` otherwise. */
  open(sealed: SealedPrivateKey, fingerprint: string, kid: string, x: string): KeyObject {
    const kek = this.byFingerprint(fingerprint);
    if (!kek) {
      throw new KeyDecryptionError(
        `signing key ${kid} was sealed by the key-encryption key with fingerprint ${fingerprint}, which is neither RELAYPLANE_KEK (${this.currentFingerprint}) nor in RELAYPLANE_KEK_PREVIOUS`,
      );
    }
    return openPrivateKey(sealed, kek, kid, x);
  }

  /** Seals under the current KEK. */
  seal(privateKey: KeyObject, kid: string): { kekFingerprint: string; sealed: SealedPrivateKey } {
    return { kekFingerprint: this.currentFingerprint, sealed: sealPrivateKey(privateKey, this.current, kid) };
  }
}

function assertKek(kek: Buffer): void {
  if (kek.length !== KEK_BYTES) throw new Error(`the key-encryption key must be ${KEK_BYTES} bytes`);
}

export function sealPrivateKey(privateKey: KeyObject, kek: Buffer, kid: string): SealedPrivateKey {
  assertKek(kek);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', kek, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(kid, 'utf8'));
  const der = privateKey.export({ format: 'der', type: 'pkcs8' });
  try {
    const ciphertext = Buffer.concat([cipher.update(der), cipher.final()]);
    return { iv, ciphertext, tag: cipher.getAuthTag() };
  } finally {
    der.fill(0);
  }
}

export class KeyDecryptionError extends Error {
  override readonly name = 'KeyDecryptionError';
}

/**
 * Opens a sealed private key and checks it belongs to the public key `x`.
 * Throws `KeyDecryptionError` with a clear message under the wrong KEK or a tampered row.
 */
export function openPrivateKey(sealed: SealedPrivateKey, kek: Buffer, kid: string, x: string): KeyObject {
  assertKek(kek);
  let der: Buffer;
  try {
    // A 16-byte tag only: without authTagLength, GCM accepts a tag cut to 4 bytes, and a forger
    // needs 2^32 tries, not 2^128, to pass a changed ciphertext (issue 31).
    const decipher = createDecipheriv('aes-256-gcm', kek, sealed.iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(kid, 'utf8'));
    decipher.setAuthTag(sealed.tag);
    der = Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]);
  } catch {
    throw new KeyDecryptionError(
      `signing key ${kid} cannot be decrypted: the key-encryption key (RELAYPLANE_KEK) is not the one it was sealed with, or the stored key is corrupt`,
    );
  }
  try {
    const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
    if (publicX(createPublicKey(privateKey)) !== x) {
      throw new KeyDecryptionError(`signing key ${kid}: the private key does not match its public key`);
    }
    return privateKey;
  } finally {
    der.fill(0);
  }
}
