import type { CredentialPaths } from '@relayplane/contract/credential-paths';
import type { ColumnType, Generated } from 'kysely';

export interface TenantsTable {
  id: string;
  name: string;
  created_at: Date;
  /** Members without a confirmed second factor may do nothing but enrol (issue 31). */
  require_mfa: Generated<boolean>;
}

export interface UsersTable {
  id: string;
  /** Trimmed and lowercased; unique. */
  email: string;
  /** argon2id PHC string. */
  password_hash: string;
  platform_admin: boolean;
  created_at: Date;
  /**
   * Moves on with every password change and "sign out everywhere": sessions, CLI tokens and
   * approved device grants carrying an older epoch are refused (migration 20261203T1000).
   */
  credentials_epoch: Generated<number>;
}

export interface MembershipsTable {
  tenant_id: string;
  user_id: string;
  role: string;
  created_at: Date;
}

export interface SessionsTable {
  id: string;
  /** SHA-256 of the bearer token; the token itself is never stored. */
  token_hash: string;
  user_id: string;
  /** The tenant the session acts in. */
  tenant_id: string;
  created_at: Date;
  expires_at: Date;
  last_seen_at: Date | null;
  /** `session` (login) or `cli` (a CLI token from the device flow). */
  kind: string;
  /** Client address and user agent of the request that created the session; null when unknown. */
  ip: string | null;
  user_agent: string | null;
  /** A login session the session cookie authenticated: listed as `browser`, else `bearer`. */
  browser: Generated<boolean>;
  /** The user's credentials epoch when the session was made (or kept): live only while equal. */
  credentials_epoch: Generated<number>;
}

export interface ProjectsTable {
  id: string;
  tenant_id: string;
  name: string;
  environment: string;
  created_at: Date;
}

export interface ApiKeysTable {
  id: string;
  tenant_id: string;
  project_id: string;
  /** Optional label; '' when none. */
  name: string;
  mode: string;
  /** SHA-256 (hex) of the key; unique. The key itself is never stored. */
  key_hash: string;
  /** The key's first 13 characters (`svc_live_` + 4 hex). */
  display_prefix: string;
  last_four: string;
  /** Sorted, without duplicates. */
  scopes: string[];
  /** The key's ceiling (jsonb, written as JSON text); null: none. */
  ceiling: ColumnType<CredentialPaths | null, string | null | undefined, never>;
  created_at: Date;
  /** Written by VerifyApiKey at most once a minute: accurate to about a minute. */
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface AllowlistEntriesTable {
  id: string;
  tenant_id: string;
  project_id: string;
  /** Normalised CIDR (network address, canonical text); unique per project. */
  cidr: string;
  created_at: Date;
}

export interface BotsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  name: string;
  /** developer or viewer. */
  role: string;
  created_at: Date;
}

export interface BotKeysTable {
  id: string;
  tenant_id: string;
  project_id: string;
  bot_id: string;
  /** SHA-256 (hex) of the bot token; unique. The token itself is never stored. */
  token_hash: string;
  /** The token's first 8 characters (`rpb_` + 4 hex). */
  display_prefix: string;
  last_four: string;
  created_at: Date;
  /** Written by Authenticate at most once a minute. */
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface IdentityTokensTable {
  id: string;
  tenant_id: string;
  project_id: string;
  /** The identity: a bot of the project. */
  bot_id: string;
  /** SHA-256 (hex) of the token; unique. The token itself is never stored. */
  token_hash: string;
  scopes: string[];
  /** The token's first 8 characters (`rpi_` + 4 hex). */
  display_prefix: string;
  last_four: string;
  created_by_user_id: string | null;
  created_by_token_id: string | null;
  /** The user at the root of the creation chain. */
  root_user_id: string;
  /** The user session at the root of the creation chain; null for tokens older than the column. */
  root_session_id: Generated<string | null>;
  created_at: Date;
  expires_at: Date;
  /** Written by Authenticate at most once a minute. */
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** OAuth device authorization grants (RFC 8628); only SHA-256 hashes of both codes are stored. */
export interface DeviceGrantsTable {
  device_code_hash: string;
  user_code_hash: string;
  client_id: string;
  scope: string;
  /** pending, approved, denied or consumed (the token was answered). */
  status: string;
  /** Grows by 5 s with every slow_down. */
  interval_seconds: number;
  created_at: Date;
  expires_at: Date;
  last_polled_at: Date | null;
  user_id: string | null;
  tenant_id: string | null;
  decided_at: Date | null;
  /** Where the device asked from (its StartDeviceAuthorization request); null when unknown. */
  requested_ip: string | null;
  requested_user_agent: string | null;
  /** The session that approved the grant; redeeming it needs that session live. */
  approved_session_id: Generated<string | null>;
  /** The approver's credentials epoch at the decision. */
  credentials_epoch: Generated<number | null>;
}

/** A password step waiting for its second factor (migration 20261203T1100); only the token's hash. */
export interface LoginChallengesTable {
  token_hash: string;
  user_id: string;
  tenant_id: string;
  password_hash: string;
  credentials_epoch: number;
  device_nonce: string | null;
  failed_attempts: Generated<number>;
  created_at: Date;
  expires_at: Date;
}

/** A user's TOTP enrolment (migration 20261203T1200): the secret sealed, never in clear. */
export interface UserTotpTable {
  user_id: string;
  sealed_secret: string;
  /** pending (started, not confirmed by a code) or confirmed. */
  status: string;
  created_at: Date;
  confirmed_at: Date | null;
  /** The last time step whose code was accepted (bigint: answered as a string). */
  last_step: string | null;
}

/** Single-use recovery codes: their SHA-256 only. */
export interface UserRecoveryCodesTable {
  user_id: string;
  code_hash: string;
  created_at: Date;
  used_at: Date | null;
}

/** A signed checkpoint of a chain's head (migration 20261203T1300). */
export interface AuditCheckpointsTable {
  chain_key: string;
  seq: string | number;
  hash: string;
  at: Date;
  kid: string;
  /** Compact JWS over {tenant_id, seq, hash, at} (audit/checkpoint-key.ts). */
  jws: string;
}

/** The audit trail (docs/audit.md): append-only, chained per tenant. */
export interface AuditEventsTable {
  /** UUIDv7. */
  id: string;
  /** The tenant id, or '_platform'. */
  chain_key: string;
  /** Position in the chain, from 1 (pg returns bigint as a string). */
  seq: string | number;
  occurred_at: Date;
  tenant_id: string | null;
  actor_type: string;
  actor_id: string;
  action: string;
  target_type: string;
  target_id: string;
  outcome: string;
  ip: string | null;
  user_agent: string | null;
  request_id: string | null;
  details: unknown;
  prev_hash: string;
  hash: string;
  source: string;
  recorded_at: Generated<Date>;
}

/** Each chain's last event, and the anchor pruning left (the last pruned event). */
export interface AuditChainHeadsTable {
  chain_key: string;
  seq: string | number;
  hash: string;
  anchor_seq: Generated<string | number>;
  anchor_hash: Generated<string>;
}

/** A project's webhook endpoint (issue 34); the secrets sealed (mfa/sealing.ts, the id as AAD). */
export interface WebhookEndpointsTable {
  id: string;
  tenant_id: string;
  project_id: string;
  url: string;
  events: string[];
  description: Generated<string>;
  enabled: Generated<boolean>;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: Date | null;
  failing_since: Date | null;
  disabled_at: Date | null;
  disabled_reason: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** An event as a webhook message: the envelope to send, once per source event and tenant. */
export interface WebhookMessagesTable {
  id: string;
  source_id: string;
  tenant_id: string;
  project_id: string | null;
  type: string;
  subject: string;
  body: string;
  occurred_at: Date;
  created_at: Generated<Date>;
}

/** One message to one endpoint: its attempts so far and the last one's outcome. */
export interface WebhookDeliveriesTable {
  id: string;
  seq: Generated<string>;
  endpoint_id: string;
  message_id: string;
  tenant_id: string;
  subject: string;
  status: 'pending' | 'delivering' | 'succeeded' | 'failed';
  attempts: Generated<number>;
  next_attempt_at: Date;
  queued_at: Date | null;
  last_attempt_at: Date | null;
  response_status: number | null;
  latency_ms: number | null;
  response_body: string | null;
  error: string | null;
  created_at: Generated<Date>;
  completed_at: Date | null;
}

export interface AdminDatabase {
  audit_events: AuditEventsTable;
  audit_chain_heads: AuditChainHeadsTable;
  device_grants: DeviceGrantsTable;
  tenants: TenantsTable;
  users: UsersTable;
  memberships: MembershipsTable;
  sessions: SessionsTable;
  projects: ProjectsTable;
  api_keys: ApiKeysTable;
  allowlist_entries: AllowlistEntriesTable;
  bots: BotsTable;
  bot_keys: BotKeysTable;
  identity_tokens: IdentityTokensTable;
  login_challenges: LoginChallengesTable;
  user_totp: UserTotpTable;
  user_recovery_codes: UserRecoveryCodesTable;
  audit_checkpoints: AuditCheckpointsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_messages: WebhookMessagesTable;
  webhook_deliveries: WebhookDeliveriesTable;
}
