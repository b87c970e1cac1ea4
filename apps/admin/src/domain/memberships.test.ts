import { describe, expect, it } from 'vitest';
import { canManageMembers, decideAddMember, decideMemberChange } from './memberships.ts';

describe('membership decisions', () => {
  it('lets only owners and admins manage members', () => {
    expect(canManageMembers('owner')).toBe(true);
    expect(canManageMembers('admin')).toBe(true);
    expect(canManageMembers('developer')).toBe(false);
    expect(canManageMembers('viewer')).toBe(false);
    expect(decideAddMember('developer', 'viewer')).toBe('not_allowed');
    expect(decideMemberChange('viewer', 'viewer', { kind: 'remove' }, 1)).toBe('not_allowed');
  });

  it('keeps the owner role in the hands of owners', () => {
    expect(decideAddMember('admin', 'owner')).toBe('owner_only');
    expect(decideAddMember('admin', 'admin')).toBe('ok');
    expect(decideAddMember('owner', 'owner')).toBe('ok');
    expect(decideMemberChange('admin', 'owner', { kind: 'remove' }, 2)).toBe('owner_only');
    expect(decideMemberChange('admin', 'owner', { kind: 'set_role', role: 'viewer' }, 2)).toBe('owner_only');
    expect(decideMemberChange('admin', 'viewer', { kind: 'set_role', role: 'owner' }, 2)).toBe('owner_only');
    expect(decideMemberChange('admin', 'developer', { kind: 'set_role', role: 'admin' }, 1)).toBe('ok');
  });

  it('never leaves a tenant without an owner', () => {
    expect(decideMemberChange('owner', 'owner', { kind: 'remove' }, 1)).toBe('last_owner');
    expect(decideMemberChange('owner', 'owner', { kind: 'set_role', role: 'admin' }, 1)).toBe('last_owner');
    expect(decideMemberChange('owner', 'owner', { kind: 'set_role', role: 'owner' }, 1)).toBe('ok');
    expect(decideMemberChange('owner', 'owner', { kind: 'remove' }, 2)).toBe('ok');
  });
});
