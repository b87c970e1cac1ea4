import { describe, expect, it } from 'vitest';
import {
  decidePoll,
  hashCode,
  isValidScope,
  newDeviceCode,
  newUserCode,
  normaliseUserCode,
  type PolledGrant,
  USER_CODE_ALPHABET,
} from './device-codes.ts';

const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;

describe('user codes', () => {
  it('are XXXX-XXXX from the 20 consonants RFC 8628 §6.1 suggests: no vowels, no digits', () => {
    expect(USER_CODE_ALPHABET).toBe('BCDFGHJKLMNPQRSTVWXZ');
    for (let i = 0; i < 200; i++) expect(newUserCode()).toMatch(USER_CODE);
  });

  it('draw every character equally: bytes above the last multiple of 20 are dropped, not folded', () => {
    // 240..255 would bias the first 16 letters if taken modulo 20; they must be skipped.
    const bytes = [255, 240, 0, 19, 20, 239, 241, 1, 2, 3, 4, 5];
    const random = (size: number) => Buffer.from(bytes.splice(0, size));
    expect(newUserCode(random)).toBe('BZBZ-CDFG');
  });

  it('rarely repeat: 2,000 draws are all distinct (20^8 ≈ 2.6e10 codes)', () => {
    const codes = new Set(Array.from({ length: 2_000 }, () => newUserCode()));
    expect(codes.size).toBe(2_000);
  });

  it('are read back whatever the case, dashes and spaces the user typed', () => {
    for (const typed of [
      'BCDF-GHJK',
      'bcdf-ghjk',
      'bcdfghjk',
      ' BCDF GHJK ',
      'bc-df-gh-jk',
      'BCDF\u2013GHJK',
    ]) {
      expect(normaliseUserCode(typed), typed).toBe('BCDF-GHJK');
    }
  });

  it('refuse input that cannot be a user code: wrong length, vowels, digits, other symbols', () => {
    for (const typed of [
      '',
      'BCDF-GHJ',
      'BCDF-GHJKL',
      'ABCD-GHJK',
      'BCDF-GHJ0',
      'BCDF_GHJK',
      'BCDF-GHJ!',
      'B'.repeat(100),
    ]) {
      expect(normaliseUserCode(typed), typed).toBeUndefined();
    }
  });
});

describe('device codes', () => {
  it('carry 256 random bits, base64url', () => {
    const code = newDeviceCode();
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(code, 'base64url')).toHaveLength(32);
    expect(newDeviceCode()).not.toBe(code);
  });

  it('are stored as SHA-256 hex only', () => {
    expect(hashCode('BCDF-GHJK')).toMatch(/^[0-9a-f]{64}$/);
    expect(hashCode('BCDF-GHJK')).not.toBe(hashCode('BCDF-GHJL'));
  });
});

describe('scope', () => {
  it('accepts RFC 6749 scope tokens separated by single spaces, and no scope', () => {
    expect(isValidScope('')).toBe(true);
    expect(isValidScope('openid admin:read')).toBe(true);
    expect(isValidScope('a  b')).toBe(false);
    expect(isValidScope('quote"d')).toBe(false);
    expect(isValidScope('nul\u0000')).toBe(false);
    expect(isValidScope('x'.repeat(513))).toBe(false);
  });
});

describe('decidePoll', () => {
  const now = new Date('2026-11-26T10:00:00Z');
  const grant = (over: Partial<PolledGrant> = {}): PolledGrant => ({
    status: 'pending',
    expiresAt: new Date(now.getTime() + 600_000),
    intervalSeconds: 5,
    lastPolledAt: null,
    ...over,
  });
  const ago = (ms: number) => new Date(now.getTime() - ms);

  it('answers authorization_pending to the first poll and to polls that waited the interval', () => {
    expect(decidePoll(grant(), now)).toEqual({ outcome: 'authorization_pending', intervalSeconds: 5 });
    expect(decidePoll(grant({ lastPolledAt: ago(5_000) }), now).outcome).toBe('authorization_pending');
    // Half a second of clock skew between replicas is tolerated.
    expect(decidePoll(grant({ lastPolledAt: ago(4_600) }), now).outcome).toBe('authorization_pending');
  });

  it('answers slow_down and grows the interval by 5 s when polled sooner than the interval', () => {
    expect(decidePoll(grant({ lastPolledAt: ago(1_000) }), now)).toEqual({
      outcome: 'slow_down',
      intervalSeconds: 10,
    });
    expect(decidePoll(grant({ lastPolledAt: ago(6_000), intervalSeconds: 10 }), now)).toEqual({
      outcome: 'slow_down',
      intervalSeconds: 15,
    });
  });

  it('answers expired_token once the code expired, whatever its state', () => {
    for (const status of ['pending', 'approved', 'denied'] as const) {
      expect(decidePoll(grant({ status, expiresAt: now }), now).outcome).toBe('expired_token');
    }
  });

  it('answers access_denied after a denial, the token after an approval, invalid_grant once consumed', () => {
    expect(decidePoll(grant({ status: 'denied' }), now).outcome).toBe('access_denied');
    expect(decidePoll(grant({ status: 'approved', lastPolledAt: ago(10) }), now).outcome).toBe('issue');
    expect(decidePoll(grant({ status: 'consumed' }), now).outcome).toBe('invalid_grant');
  });

  it('answers access_denied to an approval whose approving session is no longer live (issue 31)', () => {
    expect(decidePoll(grant({ status: 'approved', approverLive: true }), now).outcome).toBe('issue');
    expect(decidePoll(grant({ status: 'approved', approverLive: false }), now)).toEqual({
      outcome: 'access_denied',
      intervalSeconds: 5,
    });
    // Expiry still wins.
    expect(decidePoll(grant({ status: 'approved', approverLive: false, expiresAt: now }), now).outcome).toBe(
      'expired_token',
    );
  });
});
