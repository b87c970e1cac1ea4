import { describe, expect, it } from 'vitest';
import { canCreateProject, canManageApiKeys, isRole, ROLES } from './roles.ts';

describe('roles', () => {
  it('lets every role but viewer create projects', () => {
    expect(ROLES.filter(canCreateProject)).toEqual(['owner', 'admin', 'developer']);
  });

  it('lets every role but viewer manage API keys', () => {
    expect(ROLES.filter(canManageApiKeys)).toEqual(['owner', 'admin', 'developer']);
  });

  it('recognises exactly the four tenant roles', () => {
    expect(ROLES.every(isRole)).toBe(true);
    expect(isRole('superuser')).toBe(false);
    expect(isRole('Owner')).toBe(false);
  });
});
