import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  checkApiKeyMode,
  checkApiKeyName,
  checkApiKeyScopes,
  generateApiKey,
  isApiKey,
  isKeyHash,
} from './api-keys.ts';

describe('generateApiKey', () => {
  it.each(['live', 'test'] as const)(
    'makes a svc_%s_ key of 64 hex with its hash, prefix and last four',
    (mode) => {
      const secret = generateApiKey(mode);
      expect(secret.key).toMatch(new RegExp(`^svc_${mode}_[0-9a-f]{64}$`));
      expect(isApiKey(secret.key)).toBe(true);
      expect(secret.keyHash).toBe(createHash('sha256').update(secret.key).digest('hex'));
      expect(secret.displayPrefix).toBe(secret.key.slice(0, 13));
      expect(secret.displayPrefix).toMatch(new RegExp(`^svc_${mode}_[0-9a-f]{4}$`));
      expect(secret.lastFour).toBe(secret.key.slice(-4));
      expect(secret.lastFour).toMatch(/^[0-9a-f]{4}$/);
    },
  );

  it('never repeats a key', () => {
    const keys = new Set(Array.from({ length: 100 }, () => generateApiKey('live').key));
    expect(keys.size).toBe(100);
  });
});

describe('isApiKey and isKeyHash', () => {
  it.each([
    `svc_prod_${'a'.repeat(64)}`,
    `svc_live_${'a'.repeat(63)}`,
    `svc_live_${'A'.repeat(64)}`,
    `svc_live_${'a'.repeat(65)}`,
    `rpu_${'a'.repeat(72)}`,
  ])('rejects the key %j', (key) => {
    expect(isApiKey(key)).toBe(false);
  });

  it('accepts only 64 lowercase hex as a hash', () => {
    expect(isKeyHash('0'.repeat(64))).toBe(true);
    expect(isKeyHash('F'.repeat(64))).toBe(false);
    expect(isKeyHash('0'.repeat(63))).toBe(false);
    expect(isKeyHash(`${'0'.repeat(64)}\n`)).toBe(false);
  });
});

describe('checkApiKeyMode', () => {
  it('defaults to live and accepts live and test', () => {
    expect(checkApiKeyMode('')).toEqual({ ok: true, value: 'live' });
    expect(checkApiKeyMode('live')).toEqual({ ok: true, value: 'live' });
    expect(checkApiKeyMode('test')).toEqual({ ok: true, value: 'test' });
  });

  it.each(['prod', 'Live', ' test'])('rejects %j', (mode) => {
    expect(checkApiKeyMode(mode)).toEqual({ ok: false, message: 'mode must be one of live, test' });
  });
});

describe('checkApiKeyScopes', () => {
  it('grants every scope when none is asked for, sorted', () => {
    expect(checkApiKeyScopes([])).toEqual({
      ok: true,
      value: ['relay:publish', 'relay:session', 'relay:subscribe'],
    });
  });

  it('drops duplicates and sorts', () => {
    expect(checkApiKeyScopes(['relay:subscribe', 'relay:session', 'relay:subscribe'])).toEqual({
      ok: true,
      value: ['relay:session', 'relay:subscribe'],
    });
  });

  it('names the first unknown scope', () => {
    expect(checkApiKeyScopes(['relay:session', 'relay:admin', 'x'])).toEqual({
      ok: false,
      message: 'unknown scope "relay:admin"; known scopes are relay:session, relay:publish, relay:subscribe',
    });
  });
});

describe('checkApiKeyName', () => {
  it('trims, allows empty and up to 64 characters counted as characters', () => {
    expect(checkApiKeyName('  ci deploy ')).toEqual({ ok: true, value: 'ci deploy' });
    expect(checkApiKeyName('')).toEqual({ ok: true, value: '' });
    expect(checkApiKeyName('🔑'.repeat(64)).ok).toBe(true);
  });

  it('rejects 65 characters and unprintable ones', () => {
    expect(checkApiKeyName('x'.repeat(65))).toEqual({
      ok: false,
      message: 'name must be at most 64 characters',
    });
    expect(checkApiKeyName('ci\ndeploy')).toEqual({
      ok: false,
      message: 'name must contain only printable characters',
    });
  });
});
