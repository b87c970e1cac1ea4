/**
 * The audit key (issue 31; docs/audit.md, "Signed checkpoints"): an Ed25519 key that signs chain
 * heads and is kept out of the database, so write access to the database alone cannot forge a
 * checkpoint. Read from `RELAYPLANE_AUDIT_SIGNING_KEY_FILE` (PEM, PKCS#8), or derived from the
 * KEK (HKDF-SHA256 with its own label → the 32-byte Ed25519 seed) when no file is given. Its
 * public half is published as a JWKS (`GET /v1/audit/keys`), `kid` the RFC 7638 thumbprint.
 *
 * A checkpoint is a compact JWS (`alg: EdDSA`, `typ: relayplane-audit-checkpoint+jws`, `kid`)
 * whose payload is the JSON `{"tenant_id", "seq", "hash", "at"}`: any JOSE library verifies it
 * against the JWKS.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
  sign,
} from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CHECKPOINT_JWS_TYPE,
  type CheckpointPayload,
  openCheckpoint,
} from '@relayplane/contract/audit-checkpoint';
import { ConfigError } from '@relayplane/shared/config';

const HKDF_INFO = 'relayplane/audit-checkpoint-key/v1';
/** PKCS#8 DER of an Ed25519 private key, before its 32-byte seed (RFC 8410). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

const b64 = (value: Buffer | string) => Buffer.from(value).toString('base64url');

export class AuditSigningKey {
  readonly kid: string;
  readonly #private: KeyObject;
  readonly #public: KeyObject;
  readonly #x: string;

  private constructor(privateKey: KeyObject) {
    if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error('the audit key must be Ed25519');
    this.#private = privateKey;
    this.#public = createPublicKey(privateKey);
    this.#x = (this.#public.export({ format: 'jwk' }) as { x: string }).x;
    // RFC 7638: the SHA-256 of the required members in lexicographic order, no whitespace.
    this.kid = b64(createHash('sha256').update(`{"crv":"Ed25519","kty":"OKP","x":"${this.#x}"}`).digest());
  }

  /** From `RELAYPLANE_AUDIT_SIGNING_KEY_FILE` (PEM PKCS#8 Ed25519). */
  static fromFile(path: string): AuditSigningKey {
    let pem: Buffer;
    try {
      pem = readFileSync(path);
    } catch (err) {
      throw new ConfigError(
        'RELAYPLANE_AUDIT_SIGNING_KEY_FILE',
        `cannot be read (${(err as Error).message})`,
      );
    }
    try {
      return new AuditSigningKey(createPrivateKey(pem));
    } catch {
      throw new ConfigError(
        'RELAYPLANE_AUDIT_SIGNING_KEY_FILE',
        'must hold an Ed25519 private key (PEM, PKCS#8)',
      );
    }
  }

  /** Derived from the KEK: the same on every replica, never stored. */
  static fromKek(kek: Buffer): AuditSigningKey {
    const seed = Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), HKDF_INFO, 32));
    return new AuditSigningKey(
      createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' }),
    );
  }

  static fromPrivateKey(key: KeyObject): AuditSigningKey {
    return new AuditSigningKey(key);
  }

  jwk(): PublicJwk {
    return { kty: 'OKP', crv: 'Ed25519', x: this.#x, kid: this.kid, alg: 'EdDSA', use: 'sig' };
  }

  /** The checkpoint as a compact JWS. */
  sign(payload: CheckpointPayload): string {
    const header = b64(JSON.stringify({ alg: 'EdDSA', typ: CHECKPOINT_JWS_TYPE, kid: this.kid }));
    const body = b64(JSON.stringify(payload));
    const signature = sign(null, Buffer.from(`${header}.${body}`), this.#private);
    return `${header}.${body}.${b64(signature)}`;
  }

  /** The payload of a JWS this key signed, or undefined (another key, altered, not a JWS). */
  open(jws: string): CheckpointPayload | undefined {
    return openCheckpoint(jws, this.#public, this.kid);
  }
}

/**
 * Embedded mode: the audit key lives in `<dataDir>/audit-signing-key.pem` (PKCS#8, mode 0600),
 * made on first start like the KEK; answers the file's path (`RELAYPLANE_AUDIT_SIGNING_KEY_FILE`).
 */
export function ensureAuditKeyFile(dataDir: string): string {
  const path = join(dataDir, 'audit-signing-key.pem');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const { privateKey } = generateKeyPairSync('ed25519');
  try {
    // `wx`: an existing key is kept (and another process's, if it made one first).
    writeFileSync(path, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return path;
}
