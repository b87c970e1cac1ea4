import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEVICE_TOKEN_TTL_SECONDS, DeviceTokens } from './device-tokens.ts';

const NOW = new Date('2026-11-28T12:00:00Z');

describe('device tokens', () => {
  const tokens = new DeviceTokens(randomBytes(32));

  it('recognise a token minted for the same user, with its nonce', () => {
    const device = tokens.mint('usr_a', NOW);
    expect(tokens.verify(device.token, 'usr_a', NOW)).toEqual(device);
  });

  it('refuse a token of another user, another key, a changed payload or mac, and an expired one', () => {
    const device = tokens.mint('usr_a', NOW);
    expect(tokens.verify(device.token, 'usr_b', NOW)).toBeUndefined();
    expect(new DeviceTokens(randomBytes(32)).verify(device.token, 'usr_a', NOW)).toBeUndefined();
    const [payload = '', mac = ''] = device.token.split('.');
    const forged = Buffer.from(JSON.stringify({ u: 'usr_a', n: 'chosen', e: 9_999_999_999 })).toString(
      'base64url',
    );
    expect(tokens.verify(`${forged}.${mac}`, 'usr_a', NOW)).toBeUndefined();
    expect(tokens.verify(`${payload}.${mac.slice(1)}x`, 'usr_a', NOW)).toBeUndefined();
    expect(tokens.verify(`${payload}.${mac}.x`, 'usr_a', NOW)).toBeUndefined();
    const later = new Date(NOW.getTime() + DEVICE_TOKEN_TTL_SECONDS * 1000);
    expect(tokens.verify(device.token, 'usr_a', later)).toBeUndefined();
    expect(tokens.verify('', 'usr_a', NOW)).toBeUndefined();
    expect(tokens.verify('x'.repeat(600), 'usr_a', NOW)).toBeUndefined();
  });

  it('give every device its own nonce', () => {
    expect(tokens.mint('usr_a', NOW).nonce).not.toBe(tokens.mint('usr_a', NOW).nonce);
  });
});
