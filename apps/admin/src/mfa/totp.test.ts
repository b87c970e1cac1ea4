import { Secret, TOTP } from 'otpauth';
import { describe, expect, it } from 'vitest';
import { base32, hotp, matchingStep, newTotpSecret, otpauthUri, stepAt } from './totp.ts';

/** RFC 6238 Appendix B's SHA-1 seed: "12345678901234567890". */
const RFC_SECRET = Buffer.from('12345678901234567890');

describe('TOTP (RFC 6238)', () => {
  it('matches the RFC 6238 Appendix B SHA-1 vectors (8 digits) and their 6-digit tails', () => {
    const vectors: [number, string][] = [
      [59, '94287082'],
      [1111111109, '07081804'],
      [1111111111, '14050471'],
      [1234567890, '89005924'],
      [2000000000, '69279037'],
      [20000000000, '65353130'],
    ];
    for (const [seconds, code] of vectors) {
      const step = Math.floor(seconds / 30);
      expect(hotp(RFC_SECRET, step, 8)).toBe(code);
      expect(hotp(RFC_SECRET, step)).toBe(code.slice(2));
    }
  });

  it('agrees with a well-kept TOTP library (otpauth) on codes, the base32 secret and the URI', () => {
    const secret = newTotpSecret();
    const now = new Date('2026-11-28T12:00:10Z');
    const library = new TOTP({
      secret: Secret.fromBase32(base32(secret)),
      digits: 6,
      period: 30,
      algorithm: 'SHA1',
    });
    const code = library.generate({ timestamp: now.getTime() });
    expect(matchingStep(secret, code, now)).toBe(stepAt(now));
    const uri = otpauthUri(secret, 'owner@example.com');
    expect(uri).toMatch(/^otpauth:\/\/totp\/Relayplane:owner%40example\.com\?/);
    // The library reads back what an authenticator app would.
    const parsed = new URL(uri);
    expect(parsed.searchParams.get('secret')).toBe(library.secret.base32);
    expect(parsed.searchParams.get('digits')).toBe('6');
    expect(parsed.searchParams.get('period')).toBe('30');
    expect(parsed.searchParams.get('algorithm')).toBe('SHA1');
  });

  it('accepts one step either side, not two; refuses what is not six digits', () => {
    const secret = newTotpSecret();
    const now = new Date('2026-11-28T12:00:10Z');
    const step = stepAt(now);
    expect(matchingStep(secret, hotp(secret, step - 1), now)).toBe(step - 1);
    expect(matchingStep(secret, hotp(secret, step + 1), now)).toBe(step + 1);
    const far = hotp(secret, step + 2);
    if (![step - 1, step, step + 1].some((s) => hotp(secret, s) === far)) {
      expect(matchingStep(secret, far, now)).toBeUndefined();
    }
    expect(matchingStep(secret, '12345', now)).toBeUndefined();
    expect(matchingStep(secret, '1234567', now)).toBeUndefined();
    expect(matchingStep(secret, 'abcdef', now)).toBeUndefined();
  });
});
