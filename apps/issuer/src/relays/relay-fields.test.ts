import { describe, expect, it } from 'vitest';
import { hostPort, isPort, isRegion, normalizeHost, parseHostPort, relayUrl } from './relay-fields.ts';

describe('relay fields', () => {
  it('accepts regions of 1-32 lowercase letters, digits and hyphens only', () => {
    expect(isRegion('eu-west-1')).toBe(true);
    expect(isRegion('a'.repeat(32))).toBe(true);
    expect(isRegion('a'.repeat(33))).toBe(false);
    expect(isRegion('')).toBe(false);
    expect(isRegion('EU-west')).toBe(false);
    expect(isRegion('eu_west')).toBe(false);
  });

  it('normalizes hostnames and IP addresses and rejects anything else', () => {
    expect(normalizeHost('Relay-1.Example.NET')).toBe('relay-1.example.net');
    expect(normalizeHost('relay.example.net.')).toBe('relay.example.net');
    expect(normalizeHost('10.0.0.7')).toBe('10.0.0.7');
    expect(normalizeHost('2001:DB8:0:0::1')).toBe('2001:db8::1');
    expect(normalizeHost('[::1]')).toBe('::1');
    expect(
      normalizeHost(`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`),
    ).toHaveLength(253);
    for (const bad of [
      '',
      'relay host',
      '-relay.example',
      'relay-.example',
      'a..b',
      `${'a'.repeat(64)}.example`,
      `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`,
      '999.1.1.1',
      'fe80::1%eth0',
      'relay.example:443',
      'https://relay.example',
    ]) {
      expect(normalizeHost(bad), bad).toBeUndefined();
    }
  });

  it('accepts ports 1..65535 as integers only', () => {
    expect(isPort(1)).toBe(true);
    expect(isPort(65535)).toBe(true);
    for (const bad of [0, 65536, 443.5, Number.NaN, '443', -1]) expect(isPort(bad), String(bad)).toBe(false);
  });

  it('brackets IPv6 hosts in host:port and URLs', () => {
    expect(hostPort('relay.example', 443)).toBe('relay.example:443');
    expect(hostPort('2001:db8::1', 443)).toBe('[2001:db8::1]:443');
    expect(relayUrl('::1', 4433)).toBe('https://[::1]:4433');
    expect(relayUrl('10.0.0.1', 4433)).toBe('https://10.0.0.1:4433');
  });

  it('parses host:port entries, brackets for IPv6 and only for it', () => {
    expect(parseHostPort('Edge.Example:443')).toEqual({ host: 'edge.example', port: 443 });
    expect(parseHostPort('[2001:DB8::1]:443')).toEqual({ host: '2001:db8::1', port: 443 });
    for (const bad of [
      'edge.example',
      '2001:db8::1:443',
      '[edge.example]:443',
      'edge.example:0',
      'edge.example:70000',
      ':443',
    ]) {
      expect(parseHostPort(bad), bad).toBeUndefined();
    }
  });
});
