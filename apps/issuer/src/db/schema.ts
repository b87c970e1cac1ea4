import type { Generated } from 'kysely';

/** Bytes as the pg driver (Buffer) or PGlite (Uint8Array) returns them. */
export type Bytes = Uint8Array;

export interface SigningKeysTable {
  /** RFC 7638 thumbprint of the public key. */
  kid: string;
  /** Public key (base64url, the JWK `x`). */
  x: string;
  /** Which key-encryption key sealed the private half (see `kekFingerprint`). */
  kek_fingerprint: string;
  /** AES-256-GCM sealed PKCS#8 private key; all three null once the key is removed. */
  private_iv: Bytes | null;
  private_ciphertext: Bytes | null;
  private_tag: Bytes | null;
  /** Published in the JWKS from this instant. */
  created_at: Date;
  activated_at: Date | null;
  deactivated_at: Date | null;
  remove_after: Date | null;
  removed_at: Date | null;
}

/** At most one row: an on-demand rotation waiting for the next key to become eligible. */
export interface RotationRequestsTable {
  id: Generated<number>;
  requested_at: Date;
  requested_by: string;
}

export interface IssuerDatabase {
  signing_keys: SigningKeysTable;
  rotation_requests: RotationRequestsTable;
}
