import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretSealer } from './sealing.ts';

describe('TOTP secrets sealed at rest', () => {
  const kek = randomBytes(32);
  const secret = randomBytes(20);

  it('opens for the same user under the same KEK, and under it as a previous KEK after a rotation', () => {
    const sealed = new SecretSealer(kek).seal(secret, 'usr_a');
    expect(new SecretSealer(kek).open(sealed, 'usr_a')).toEqual(secret);
    expect(new SecretSealer(randomBytes(32), [kek]).open(sealed, 'usr_a')).toEqual(secret);
  });

  it('refuses another user (the user id is associated data), another KEK, and a changed ciphertext', () => {
    const sealer = new SecretSealer(kek);
    const sealed = sealer.seal(secret, 'usr_a');
    expect(sealer.open(sealed, 'usr_b')).toBeUndefined();
    expect(new SecretSealer(randomBytes(32)).open(sealed, 'usr_a')).toBeUndefined();
    const [v, iv, tag, ct = ''] = sealed.split('.');
    const flipped = Buffer.from(ct, 'base64url');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    expect(sealer.open([v, iv, tag, flipped.toString('base64url')].join('.'), 'usr_a')).toBeUndefined();
    expect(sealer.open('not sealed', 'usr_a')).toBeUndefined();
  });

  it('requires the whole 16-byte tag: one cut to 4 bytes is refused', () => {
    const sealer = new SecretSealer(kek);
    const [v, iv, tag = '', ct] = sealer.seal(secret, 'usr_a').split('.');
    const cut = Buffer.from(tag, 'base64url').subarray(0, 4).toString('base64url');
    expect(sealer.open([v, iv, cut, ct].join('.'), 'usr_a')).toBeUndefined();
  });

  it('re-seals what a previous KEK sealed under the current one, leaves the current alone, and says what opens under none', () => {
    const next = randomBytes(32);
    const rotated = new SecretSealer(next, [kek]);
    const old = new SecretSealer(kek).seal(secret, 'usr_a');
    const outcome = rotated.reseal(old, 'usr_a');
    if (outcome.state !== 'resealed') throw new Error(`expected resealed, got ${outcome.state}`);
    expect(outcome.sealed).not.toBe(old);
    // Now the current KEK alone opens it, the previous one no longer.
    expect(new SecretSealer(next).open(outcome.sealed, 'usr_a')).toEqual(secret);
    expect(new SecretSealer(kek).open(outcome.sealed, 'usr_a')).toBeUndefined();
    expect(rotated.reseal(outcome.sealed, 'usr_a')).toEqual({ state: 'current' });
    expect(rotated.open(outcome.sealed, 'usr_a')).toEqual(secret);
    expect(rotated.reseal(old, 'usr_b')).toEqual({ state: 'unopened' });
    expect(new SecretSealer(randomBytes(32)).reseal(old, 'usr_a')).toEqual({ state: 'unopened' });
  });

  it('never holds the secret in clear', () => {
    const sealed = new SecretSealer(kek).seal(secret, 'usr_a');
    for (const encoding of ['hex', 'base64', 'base64url'] as const) {
      expect(sealed).not.toContain(secret.toString(encoding).replace(/=+$/, ''));
    }
  });
});
