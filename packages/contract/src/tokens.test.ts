import { describe, expect, it } from 'vitest';
import { hashToken, newToken, parseToken, TOKEN_PREFIXES, type TokenKind } from './tokens.ts';

const KINDS = Object.keys(TOKEN_PREFIXES) as TokenKind[];

/** Replaces the character at `i` with a different hex digit. */
function flip(token: string, i: number): string {
  const c = token[i];
  const replacement = c === '0' ? '1' : '0';
  return token.slice(0, i) + replacement + token.slice(i + 1);
}

describe('tokens', () => {
  it.each(KINDS)('a new %s token parses back to its own kind and carries its prefix', (kind) => {
    const token = newToken(kind);
    expect(token.startsWith(TOKEN_PREFIXES[kind])).toBe(true);
    expect(token).toMatch(/^rp[a-z]_[0-9a-f]{72}$/);
    expect(parseToken(token)).toBe(kind);
  });

  it('every kind has a distinct prefix', () => {
    const prefixes = Object.values(TOKEN_PREFIXES);
    expect(new Set(prefixes).size).toBe(prefixes.length);
  });

  it('rejects a token with any single hex character changed (checksum)', () => {
    const token = newToken('bot');
    for (let i = TOKEN_PREFIXES.bot.length; i < token.length; i++) {
      expect(parseToken(flip(token, i)), `position ${i}`).toBeUndefined();
    }
  });

  it('rejects a token whose prefix was swapped for another kind (the checksum covers the prefix)', () => {
    const token = newToken('identity');
    const swapped = TOKEN_PREFIXES.bot + token.slice(TOKEN_PREFIXES.identity.length);
    expect(parseToken(swapped)).toBeUndefined();
  });

  it('rejects a truncated or extended token', () => {
    const token = newToken('userSession');
    expect(parseToken(token.slice(0, -1))).toBeUndefined();
    expect(parseToken(token.slice(0, 20))).toBeUndefined();
    expect(parseToken(`${token}0`)).toBeUndefined();
    expect(parseToken('')).toBeUndefined();
  });

  it('rejects an unknown prefix and uppercase hex even with a valid-looking body', () => {
    const token = newToken('cli');
    expect(parseToken(`rpx_${token.slice(4)}`)).toBeUndefined();
    expect(parseToken(`xx_${token.slice(4)}`)).toBeUndefined();
    expect(parseToken(token.toUpperCase())).toBeUndefined();
  });

  it('hashes to lowercase sha256 hex that differs per token and is stable per token', () => {
    const a = newToken('relayNode');
    const b = newToken('relayNode');
    expect(a).not.toBe(b);
    expect(hashToken(a)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashToken(a)).toBe(hashToken(a));
    expect(hashToken(a)).not.toBe(hashToken(b));
    // Known vector: sha256("abc").
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
