/** The response shapes the CLI reads (apps/gateway/src/routes, components in schemas.ts). */

export interface User {
  id: string;
  email: string;
  platform_admin: boolean;
}

export interface Tenant {
  id: string;
  name: string;
}

export interface UserSession {
  id: string;
  user: User;
  tenant: Tenant;
  role: string;
  created_at: string;
  expires_at: string;
  authenticated_by: string;
}

export interface Bot {
  id: string;
  project_id: string;
  name: string;
  role: string;
  created_at: string;
}

export interface IdentityToken {
  id: string;
  scopes: string[];
  expires_at: string;
}

/** A machine: a bot token, or an identity token acting as its bot. */
export interface BotSession {
  authenticated_by: 'bot_token' | 'identity_token';
  tenant_id: string;
  project_id: string;
  role: string;
  permissions: string[];
  bot: Bot;
  identity_token?: IdentityToken;
}

export type AnySession = UserSession | BotSession;

export interface Project {
  id: string;
  name: string;
  tenant_id: string;
  environment: string;
  created_at: string;
}

export interface ApiKey {
  id: string;
  project_id: string;
  name: string;
  mode: string;
  display_prefix: string;
  last_four: string;
  scopes: string[];
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface BotKey {
  id: string;
  bot_id: string;
  display_prefix: string;
  last_four: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface Relay {
  id: string;
  region: string;
  host: string;
  port: number;
  url: string;
  status: string;
}

export interface RegisteredRelay extends Relay {
  load: number;
  static: boolean;
  last_heartbeat_at: string | null;
  created_at: string | null;
}

export interface RelayCredential {
  token: string;
  expires_at: string;
  jti: string;
  relays: Relay[];
  fallback: string[];
}

export interface SigningKey {
  kid: string;
  state: string;
  created_at: string;
  eligible_at?: string;
  activated_at?: string;
  deactivated_at?: string;
  remove_after?: string;
  removed_at?: string;
}

export interface SigningKeyList {
  keys: SigningKey[];
  rotation_pending_since: string | null;
}

/** `POST /admin/v1/signing-keys/{kid}/revoke`. */
export interface SigningKeyRevocation {
  revoked: SigningKey & { revoked_at: string };
  /** The key that signs now (null only if the issuer could not make one). */
  active: SigningKey | null;
  already_revoked: boolean;
}
