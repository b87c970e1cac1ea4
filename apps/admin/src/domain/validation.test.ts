import { describe, expect, it } from 'vitest';
import {
  checkEmail,
  checkEnvironment,
  checkPassword,
  checkProjectName,
  checkTenantName,
  normaliseEmail,
} from './validation.ts';

describe('checkEmail', () => {
  it('normalises case and surrounding whitespace so one address has one stored form', () => {
    expect(normaliseEmail('  Alice@Example.COM ')).toBe('alice@example.com');
    expect(checkEmail(' Alice@Example.COM')).toEqual({ ok: true, value: 'alice@example.com' });
  });

  it.each([
    ['', 'email is required'],
    ['   ', 'email is required'],
    ['alice', 'email is not a valid address'],
    ['alice@', 'email is not a valid address'],
    ['@example.com', 'email is not a valid address'],
    ['alice@example', 'email is not a valid address'],
    ['al ice@example.com', 'email is not a valid address'],
    ['alice@@example.com', 'email is not a valid address'],
    ['alice@example..com', 'email is not a valid address'],
    ['ali\u0000ce@example.com', 'email is not a valid address'],
  ])('rejects %j', (input, message) => {
    expect(checkEmail(input)).toEqual({ ok: false, message });
  });

  it('accepts 254 characters and rejects 255', () => {
    const at254 = `${'a'.repeat(254 - '@example.com'.length)}@example.com`;
    expect(checkEmail(at254).ok).toBe(true);
    expect(checkEmail(`a${at254}`)).toEqual({ ok: false, message: 'email must be at most 254 characters' });
  });
});

describe('checkPassword', () => {
  it('accepts 12 to 256 characters, counted as characters not bytes', () => {
    expect(checkPassword('a'.repeat(12)).ok).toBe(true);
    expect(checkPassword('a'.repeat(256)).ok).toBe(true);
    expect(checkPassword('🔑'.repeat(12)).ok).toBe(true);
  });

  it('rejects 11 and 257 characters with the bounds in the message', () => {
    const message = 'password must be 12 to 256 characters long';
    expect(checkPassword('a'.repeat(11))).toEqual({ ok: false, message });
    expect(checkPassword('a'.repeat(257))).toEqual({ ok: false, message });
    expect(checkPassword('')).toEqual({ ok: false, message });
  });

  it('keeps surrounding spaces: they are part of the password', () => {
    expect(checkPassword('  twelve chars ')).toEqual({ ok: true, value: '  twelve chars ' });
  });
});

describe('checkTenantName', () => {
  it('trims and accepts 1 to 64 printable characters, including non-ASCII', () => {
    expect(checkTenantName('  Acme Corp ')).toEqual({ ok: true, value: 'Acme Corp' });
    expect(checkTenantName('Société Générale').ok).toBe(true);
    expect(checkTenantName('x'.repeat(64)).ok).toBe(true);
  });

  it.each([
    ['', 'tenant_name is required'],
    ['   ', 'tenant_name is required'],
    ['x'.repeat(65), 'tenant_name must be at most 64 characters'],
    ['acme\ncorp', 'tenant_name must contain only printable characters'],
    ['acme\u200bcorp', 'tenant_name must contain only printable characters'],
  ])('rejects %j', (input, message) => {
    expect(checkTenantName(input)).toEqual({ ok: false, message });
  });
});

describe('checkProjectName', () => {
  it.each(['a', '0', 'web-app', 'a1-b2', 'x'.repeat(64), '9lives', 'trailing-'])('accepts %j', (name) => {
    expect(checkProjectName(name)).toEqual({ ok: true, value: name });
  });

  const pattern =
    'name must contain only lowercase letters, digits and hyphens, and start with a letter or digit';
  it.each([
    ['', 'name is required'],
    ['x'.repeat(65), 'name must be at most 64 characters'],
    ['-web', pattern],
    ['Web', pattern],
    ['web_app', pattern],
    ['web app', pattern],
    ['wéb', pattern],
    [' web', pattern],
  ])('rejects %j', (input, message) => {
    expect(checkProjectName(input)).toEqual({ ok: false, message });
  });
});

describe('checkEnvironment', () => {
  it('defaults an empty environment to production', () => {
    expect(checkEnvironment('')).toEqual({ ok: true, value: 'production' });
  });

  it.each(['production', 'staging', 'development'])('accepts %j', (env) => {
    expect(checkEnvironment(env)).toEqual({ ok: true, value: env });
  });

  it.each(['prod', 'Production', 'test', ' staging'])('rejects %j naming the allowed values', (env) => {
    expect(checkEnvironment(env)).toEqual({
      ok: false,
      message: 'environment must be one of production, staging, development',
    });
  });
});
