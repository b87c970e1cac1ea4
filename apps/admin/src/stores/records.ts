import type { BotRoleName, KeyMode, RoleName } from '@relayplane/contract/contract';
import type { CredentialPaths } from '@relayplane/contract/credential-paths';

export interface TenantRecord {
  id: string;
  name: string;
  createdAt: Date;
}

export interface UserRecord {
  id: string;
  email: string;
  platformAdmin: boolean;
  createdAt: Date;
}

/** A user's membership of a tenant. */
export interface MemberRecord {
  user: UserRecord;
  tenantId: string;
  role: RoleName;
  createdAt: Date;
}

export interface ProjectRecord {
  id: string;
  tenantId: string;
  name: string;
  environment: string;
  createdAt: Date;
}

/** An API key as listed: everything but the key, which is never stored. */
export interface ApiKeyRecord {
  id: string;
  tenantId: string;
  projectId: string;
  name: string;
  mode: KeyMode;
  displayPrefix: string;
  lastFour: string;
  scopes: string[];
  /** The paths every credential of the key is bounded by; null: none. */
  ceiling: CredentialPaths | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** One CIDR block of a project's IP allowlist. */
export interface AllowlistEntryRecord {
  id: string;
  tenantId: string;
  projectId: string;
  /** Normalised: network address and prefix length in canonical text. */
  cidr: string;
  createdAt: Date;
}

/** True when `err` is PostgreSQL's foreign_key_violation on the named constraint. */
export function isForeignKeyViolation(err: unknown, constraint: string): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; constraint?: unknown };
  return e.code === '23503' && e.constraint === constraint;
}

/** A live session with who it acts as, re-read from the tables on every use. */
export interface SessionRecord {
  id: string;
  createdAt: Date;
  expiresAt: Date;
  lastSeenAt: Date | null;
  user: UserRecord;
  tenant: TenantRecord;
  role: RoleName;
  /** `session` (login; also when absent) or `cli` (a CLI token from the device flow). */
  kind?: SessionKind;
}

export type SessionKind = 'session' | 'cli';

/** True when `err` is PostgreSQL's unique_violation, optionally on the named constraint. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; constraint?: unknown };
  return e.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

/** A bot: a machine identity of a project, with a project-scoped role. */
export interface BotRecord {
  id: string;
  tenantId: string;
  projectId: string;
  name: string;
  role: BotRoleName;
  createdAt: Date;
}

/** A bot key as listed: everything but the token, which is never stored. */
export interface BotKeyRecord {
  id: string;
  tenantId: string;
  projectId: string;
  botId: string;
  displayPrefix: string;
  lastFour: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** An identity token as stored, without its hash. */
export interface IdentityTokenRecord {
  id: string;
  tenantId: string;
  projectId: string;
  botId: string;
  scopes: string[];
  displayPrefix: string;
  lastFour: string;
  createdByUserId: string | null;
  createdByTokenId: string | null;
  /** The user at the root of the creation chain (the creating user, or the parent token's root). */
  rootUserId: string;
  /** The user session at the root of the creation chain; null for tokens made before it was recorded. */
  rootSessionId: string | null;
  createdAt: Date;
  expiresAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}
