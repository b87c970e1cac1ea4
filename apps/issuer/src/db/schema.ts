import type { KeyMode } from '@relayplane/contract/contract';
import type { AuditOutboxTable } from '@relayplane/shared/audit-outbox';
import type { ColumnType, Generated } from 'kysely';

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
  credentials: CredentialsTable;
  revocations: RevocationsTable;
  relays: RelaysTable;
  project_watermarks: ProjectWatermarksTable;
  revoked_api_keys: RevokedApiKeysTable;
  relay_sessions: RelaySessionsTable;
  /** Per tenant: when its last cap.reached notice was written (at most one a minute). */
  cap_notices: { tenant_id: string; noticed_at: Date };
  /** Audit events not yet delivered to admin (@relayplane/shared/audit-outbox). */
  audit_outbox: AuditOutboxTable;
}

/** Per project: its credentials issued before `issued_before` are refused (only raised). */
export interface ProjectWatermarksTable {
  project_id: string;
  tenant_id: string;
  issued_before: Date;
  /** The revocation feed position it was last raised at (int8: a string from pg). */
  sequence: ColumnType<string | number | bigint, string, string>;
  updated_at: Date;
}

/** API keys revoked with their credentials: no credential of theirs is recorded afterwards. */
export interface RevokedApiKeysTable {
  api_key_id: string;
  tenant_id: string;
  project_id: string;
  revoked_at: Date;
}

/** Registered relays (static ones live in configuration). Soft-deleted rows stay for audit. */
export interface RelaysTable {
  id: string;
  region: string;
  host: string;
  port: number;
  /** SHA-256 (hex) of the relay node token; the token itself is never stored. */
  token_hash: string;
  /** SHA-256 (lowercase hex) of the DER of the relay's client certificate; null: none. */
  client_cert_sha256: ColumnType<string | null, string | null | undefined, string | null>;
  /** Relative load from the last heartbeat, 0..1. */
  load: number;
  last_heartbeat_at: Date | null;
  created_at: Date;
  deleted_at: Date | null;
}

/** Every issued credential, recorded before it is handed out (see docs/credentials.md). */
export interface CredentialsTable {
  /** `crd_…`, the JWT `jti`. */
  jti: string;
  tenant_id: string;
  project_id: string;
  api_key_id: string;
  /** Key that signed it. */
  kid: string;
  mode: KeyMode;
  /** Space-separated scopes, as in the `scope` claim. */
  scopes: string;
  issued_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

/** The revocation feed: one row per revoked credential, in commit order of `sequence`. */
export interface RevocationsTable {
  /** bigserial; pg returns int8 as a string, PGlite may return a number or bigint. */
  sequence: ColumnType<string | number | bigint, never, never>;
  jti: string;
  tenant_id: string;
  revoked_at: Date;
  expires_at: Date;
}

/** Relay sessions admitted through the relay auth endpoint (docs/credentials.md, "Sessions"). */
export interface RelaySessionsTable {
  /** The relay's session id, 128-bit hex. */
  id: string;
  relay_id: string;
  tenant_id: string;
  project_id: string;
  api_key_id: string;
  jti: string;
  kid: string;
  /** The credential's `iat` (seconds; int8: a string from pg). */
  credential_iat: ColumnType<string | number | bigint, number, never>;
  transport: string;
  remote: string;
  role: string;
  path: string;
  grant_root: string;
  grant_publish: boolean;
  grant_subscribe: boolean;
  /** moq patterns relative to `grant_root` (empty: the role is not granted). */
  grant_publish_patterns: ColumnType<string[], string[] | undefined, string[]>;
  grant_subscribe_patterns: ColumnType<string[], string[] | undefined, string[]>;
  tier: string;
  revalidate_seconds: number;
  started_at: Date;
  last_seen_at: Date;
  grant_expires_at: Date;
  ended_at: Date | null;
  end_reason: string | null;
  /** relay | admin | revocation */
  ended_by: string | null;
  duration_seconds: number | null;
  bytes_sent: ColumnType<string | number | bigint, number | undefined, number>;
  bytes_received: ColumnType<string | number | bigint, number | undefined, number>;
}
