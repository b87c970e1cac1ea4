import { describe, expect, it } from 'vitest';
import {
  BOT_ROLE_NAMES,
  CREDENTIAL_SCOPES,
  isBotRoleName,
  isCredentialScope,
  isPlanId,
  isRoleName,
  PLAN_IDS,
  ROLE_NAMES,
} from './contract.ts';

describe('roles', () => {
  it('recognises exactly the four tenant roles', () => {
    expect(ROLE_NAMES.every(isRoleName)).toBe(true);
    expect(isRoleName('superuser')).toBe(false);
    expect(isRoleName('Owner')).toBe(false);
  });

  it('gives bots only project-scoped roles, a subset of the tenant roles', () => {
    expect(BOT_ROLE_NAMES.every(isRoleName)).toBe(true);
    expect(ROLE_NAMES.filter(isBotRoleName)).toEqual([...BOT_ROLE_NAMES]);
    expect(ROLE_NAMES.filter(isBotRoleName)).toHaveLength(2);
  });
});

describe('scopes and plans', () => {
  it('recognises exactly the known credential scopes and plan ids', () => {
    expect(CREDENTIAL_SCOPES.every(isCredentialScope)).toBe(true);
    expect(isCredentialScope('relay:admin')).toBe(false);
    expect(PLAN_IDS.every(isPlanId)).toBe(true);
    expect(isPlanId('gold')).toBe(false);
  });
});
