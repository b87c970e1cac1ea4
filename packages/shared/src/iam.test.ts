import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PrincipalKind, TenantRole } from '@relayplane/proto/admin';
import { describe, expect, it } from 'vitest';
import {
  can,
  deny,
  PERMISSIONS,
  PROJECT_PERMISSIONS,
  permissionsOf,
  ROLE_PERMISSIONS,
  type RoleName,
  subjectOf,
} from './iam.ts';

const ROLES: RoleName[] = ['owner', 'admin', 'developer', 'viewer'];
const user = (role: RoleName) => ({ kind: PrincipalKind.USER_SESSION, role });

/** The rows of docs/iam.md's permission matrix: permission → [owner, admin, developer, viewer, machines]. */
function documentedMatrix(): Map<string, boolean[]> {
  const doc = readFileSync(fileURLToPath(new URL('../../../docs/iam.md', import.meta.url)), 'utf8');
  const lines = doc.split('\n');
  const header = lines.findIndex((l) => l.startsWith('| permission |'));
  if (header < 0) throw new Error('docs/iam.md has no table starting with "| permission |"');
  const rows = new Map<string, boolean[]>();
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const [permission = '', ...cells] = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    rows.set(
      permission.replaceAll('`', ''),
      cells.map((c) => c === 'yes'),
    );
  }
  return rows;
}

describe('IAM matrix', () => {
  it('docs/iam.md shows exactly the matrix the code decides with', () => {
    const expected = new Map(
      PERMISSIONS.map((p) => [
        p,
        [...ROLES.map((r) => ROLE_PERMISSIONS[r].has(p)), PROJECT_PERMISSIONS.has(p)],
      ]),
    );
    expect(documentedMatrix()).toEqual(expected);
  });

  it('owners and admins hold everything, viewers only reads, developers no member, bot or billing writes', () => {
    expect([...permissionsOf(user('owner'))]).toEqual([...PERMISSIONS]);
    expect([...permissionsOf(user('admin'))]).toEqual([...PERMISSIONS]);
    expect([...permissionsOf(user('viewer'))].every((p) => p.endsWith(':read'))).toBe(true);
    for (const p of ['members:write', 'bots:write', 'billing:write'] as const) {
      expect(can(user('developer'), p), p).toBe(false);
    }
    expect(can(user('developer'), 'api_keys:write')).toBe(true);
    expect(can(user('viewer'), 'api_keys:write')).toBe(false);
  });

  it('bots hold their role within project permissions only', () => {
    const dev = { kind: PrincipalKind.BOT, role: 'developer' as const };
    expect(can(dev, 'api_keys:write')).toBe(true);
    expect(can(dev, 'projects:write')).toBe(false);
    expect(can(dev, 'members:read')).toBe(false);
    expect(can(dev, 'credentials:revoke')).toBe(false);
    const viewer = { kind: PrincipalKind.BOT, role: 'viewer' as const };
    expect(can(viewer, 'api_keys:read')).toBe(true);
    expect(can(viewer, 'api_keys:write')).toBe(false);
  });

  it("identity tokens hold their scopes that their identity's role grants, nothing else", () => {
    const token = (role: RoleName, scopes: string[]) => ({ kind: PrincipalKind.IDENTITY, role, scopes });
    expect([...permissionsOf(token('developer', ['api_keys:write', 'projects:read']))]).toEqual([
      'projects:read',
      'api_keys:write',
    ]);
    // A viewer bot cannot lend a write it does not have, whatever the token says.
    expect(can(token('viewer', ['api_keys:write']), 'api_keys:write')).toBe(false);
    // Nor can any scope carry a tenant-wide permission.
    expect(can(token('developer', ['members:read']), 'members:read')).toBe(false);
    expect(permissionsOf(token('developer', [])).size).toBe(0);
  });

  it('unknown kinds and roles hold nothing', () => {
    expect(permissionsOf({ kind: PrincipalKind.UNSPECIFIED, role: 'owner' }).size).toBe(0);
    expect(permissionsOf({ kind: PrincipalKind.USER_SESSION, role: undefined }).size).toBe(0);
    expect(
      subjectOf({ kind: PrincipalKind.USER_SESSION, role: TenantRole.UNSPECIFIED, scopes: [] }).role,
    ).toBe(undefined);
  });

  it('the 403 message names the permission and what lacks it', () => {
    expect(deny(user('viewer'), 'api_keys:write')).toBe(
      'your role (viewer) does not grant permission api_keys:write',
    );
    expect(deny(user('viewer'), 'api_keys:read')).toBeUndefined();
    expect(deny({ kind: PrincipalKind.BOT, role: 'viewer' }, 'api_keys:write')).toBe(
      "the bot's role (viewer) does not grant permission api_keys:write",
    );
    expect(deny({ kind: PrincipalKind.IDENTITY, role: 'developer', scopes: [] }, 'api_keys:read')).toBe(
      "the identity token's scopes do not grant permission api_keys:read",
    );
    expect(deny({ kind: PrincipalKind.BOT, role: 'developer' }, 'members:read')).toBe(
      'permission members:read is not available to bots or identity tokens; use a user session',
    );
  });
});
