import { describe, expect, it } from 'vitest';
import { isRole, ROLES } from './roles.ts';

describe('roles', () => {
  it('recognises exactly the four tenant roles', () => {
    expect(ROLES.every(isRole)).toBe(true);
    expect(isRole('superuser')).toBe(false);
    expect(isRole('Owner')).toBe(false);
  });
});
