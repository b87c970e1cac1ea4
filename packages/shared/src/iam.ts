/**
 * IAM: the one place that decides what a principal may do (docs/iam.md is this file in prose;
 * a test keeps the two in step). The gateway asks it before any call (fast 403), and admin asks
 * it again with the role it re-read from its database, so a demoted member or a revoked token
 * loses access at once. Pure.
 *
 * Permissions are also the scopes of identity tokens: a token holds the scopes it was created
 * with, but never more than its identity (a bot) currently holds.
 */

import { ROLES, type RoleName } from '@relayplane/contract/contract';
import { type Principal, PrincipalKind, TenantRole } from '@relayplane/proto/admin';

export type { RoleName } from '@relayplane/contract/contract';

export const PERMISSIONS = [
  'projects:read',
  'projects:write',
  'api_keys:read',
  'api_keys:write',
  'allowlist:read',
  'allowlist:write',
  'bots:read',
  'bots:write',
  'identity_tokens:read',
  'identity_tokens:write',
  'credentials:revoke',
  'members:read',
  'members:write',
  'billing:read',
  'billing:write',
  'audit:read',
  // Owners and admins (issue 34): an endpoint receives the project's events.
  'webhooks:manage',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}

/** Owners and admins only, although it is a read: the trail shows every member's actions. */
const OWNER_ADMIN_READS: ReadonlySet<Permission> = new Set<Permission>(['audit:read']);
const READ: readonly Permission[] = PERMISSIONS.filter(
  (p) => p.endsWith(':read') && !OWNER_ADMIN_READS.has(p),
);

/** What each tenant role grants. Owner-only membership moves (owners) are membership rules. */
export const ROLE_PERMISSIONS: Readonly<Record<RoleName, ReadonlySet<Permission>>> = {
  owner: new Set(PERMISSIONS),
  admin: new Set(PERMISSIONS),
  developer: new Set<Permission>([
    ...READ,
    'projects:write',
    'api_keys:write',
    'allowlist:write',
    'identity_tokens:write',
    'credentials:revoke',
  ]),
  viewer: new Set(READ),
};

/**
 * What a machine principal (a bot, an identity token) can ever hold: bots act within their
 * project, so tenant-wide permissions (creating projects, members, billing) and revoking
 * credentials (the issuer knows a credential's tenant, not a bot's reach) are never theirs.
 */
export const PROJECT_PERMISSIONS: ReadonlySet<Permission> = new Set<Permission>([
  'projects:read',
  'api_keys:read',
  'api_keys:write',
  'allowlist:read',
  'allowlist:write',
  'bots:read',
  'identity_tokens:read',
  'identity_tokens:write',
]);

/** The wire enum of each role name (admin's gRPC messages carry roles as `TenantRole`). */
const TENANT_ROLES: Readonly<Record<RoleName, TenantRole>> = {
  [ROLES.owner]: TenantRole.OWNER,
  [ROLES.admin]: TenantRole.ADMIN,
  [ROLES.developer]: TenantRole.DEVELOPER,
  [ROLES.viewer]: TenantRole.VIEWER,
};
const ROLE_NAMES_BY_ENUM: Partial<Record<TenantRole, RoleName>> = Object.fromEntries(
  Object.entries(TENANT_ROLES).map(([name, role]) => [role, name as RoleName]),
);

/** The role's name; undefined for `UNSPECIFIED` or a value this build does not know. */
export function roleName(role: TenantRole): RoleName | undefined {
  return ROLE_NAMES_BY_ENUM[role];
}

export function tenantRole(name: RoleName): TenantRole {
  return TENANT_ROLES[name];
}

/** The subject of a decision: a principal's kind, its (re-read) role and, for identity tokens, scopes. */
export interface Subject {
  kind: PrincipalKind;
  role: RoleName | undefined;
  /** Identity tokens only. */
  scopes?: readonly string[];
}

export function subjectOf(principal: Pick<Principal, 'kind' | 'role' | 'scopes'>): Subject {
  return { kind: principal.kind, role: roleName(principal.role), scopes: principal.scopes };
}

/** Every permission the subject holds, in matrix order. */
export function permissionsOf(subject: Subject): Set<Permission> {
  const granted = subject.role ? ROLE_PERMISSIONS[subject.role] : undefined;
  if (!granted) return new Set();
  switch (subject.kind) {
    case PrincipalKind.USER_SESSION:
      return new Set(PERMISSIONS.filter((p) => granted.has(p)));
    case PrincipalKind.BOT:
      return new Set(PERMISSIONS.filter((p) => granted.has(p) && PROJECT_PERMISSIONS.has(p)));
    case PrincipalKind.IDENTITY: {
      const scopes = new Set(subject.scopes ?? []);
      return new Set(
        PERMISSIONS.filter((p) => granted.has(p) && PROJECT_PERMISSIONS.has(p) && scopes.has(p)),
      );
    }
    default:
      return new Set();
  }
}

export function can(subject: Subject, permission: Permission): boolean {
  return permissionsOf(subject).has(permission);
}

/** The 403 message for a missing permission: names the permission and what lacks it. */
export function deniedMessage(subject: Subject, permission: Permission): string {
  const role = subject.role ?? 'none';
  switch (subject.kind) {
    case PrincipalKind.USER_SESSION:
      return `your role (${role}) does not grant permission ${permission}`;
    case PrincipalKind.BOT:
    case PrincipalKind.IDENTITY:
      if (!PROJECT_PERMISSIONS.has(permission)) {
        return `permission ${permission} is not available to bots or identity tokens; use a user session`;
      }
      return subject.kind === PrincipalKind.BOT
        ? `the bot's role (${role}) does not grant permission ${permission}`
        : `the identity token's scopes do not grant permission ${permission}`;
    default:
      return `this principal does not hold permission ${permission}`;
  }
}

/** Undefined when allowed; otherwise the 403 message. */
export function deny(subject: Subject, permission: Permission): string | undefined {
  return can(subject, permission) ? undefined : deniedMessage(subject, permission);
}
