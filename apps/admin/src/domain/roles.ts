/** Tenant roles and what each may do. Pure. */

export const ROLES = ['owner', 'admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}

/** Viewers read; every other role may create projects. */
export function canCreateProject(role: Role): boolean {
  return role !== 'viewer';
}

/** Viewers only list API keys; every other role may create and revoke them. */
export function canManageApiKeys(role: Role): boolean {
  return role !== 'viewer';
}
