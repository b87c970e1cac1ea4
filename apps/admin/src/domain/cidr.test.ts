import { describe, expect, it } from 'vitest';
import { formatIPv6, parseCidr } from './cidr.ts';

function text(input: string): string {
  const parsed = parseCidr(input);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.value.text;
}

function reason(input: string): string {
  const parsed = parseCidr(input);
  if (parsed.ok) throw new Error(`${input} parsed as ${parsed.value.text}`);
  return parsed.message;
}

describe('parseCidr: IPv4', () => {
  it.each([
    ['10.1.2.3/16', '10.1.0.0/16'],
    ['10.1.2.3', '10.1.2.3/32'],
    ['10.1.2.3/32', '10.1.2.3/32'],
    ['192.168.1.255/31', '192.168.1.254/31'],
    ['172.16.200.9/12', '172.16.0.0/12'],
    ['255.255.255.255/0', '0.0.0.0/0'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['203.0.113.77/27', '203.0.113.64/27'],
  ])('%s → %s', (input, expected) => {
    expect(text(input)).toBe(expected);
  });

  it('reports the family, network bytes and prefix', () => {
    const parsed = parseCidr('10.1.2.3/16');
    expect(parsed).toEqual({
      ok: true,
      value: { family: 4, bytes: new Uint8Array([10, 1, 0, 0]), prefix: 16, text: '10.1.0.0/16' },
    });
  });
});

describe('parseCidr: IPv6', () => {
  it.each([
    ['2001:DB8:0:0::1/32', '2001:db8::/32'],
    ['2001:db8::1', '2001:db8::1/128'],
    ['::/0', '::/0'],
    ['::', '::/128'],
    ['::1', '::1/128'],
    ['2001:0db8:0000:0000:0000:ff00:0042:8329/128', '2001:db8::ff00:42:8329/128'],
    ['2001:db8:0:1:0:0:0:1/128', '2001:db8:0:1::1/128'],
    // Equal zero runs: the first is compressed.
    ['2001:0:0:1:0:0:1:1/128', '2001::1:0:0:1:1/128'],
    // The longest run wins even when it is not the first.
    ['2001:0:1:0:0:0:1:1/128', '2001:0:1::1:1/128'],
    // A single zero group is written 0, not ::.
    ['2001:db8:0:1:1:1:1:1/128', '2001:db8:0:1:1:1:1:1/128'],
    ['fe80::1:2:3:4/64', 'fe80::/64'],
    ['2001:db8:abcd:12ff::/56', '2001:db8:abcd:1200::/56'],
    ['2001:db8::7/127', '2001:db8::6/127'],
    ['1:2:3:4:5:6:7:8/128', '1:2:3:4:5:6:7:8/128'],
    ['1:2:3:4:5:6:7::/128', '1:2:3:4:5:6:7:0/128'],
    ['64:ff9b::192.0.2.33/96', '64:ff9b::/96'],
  ])('%s → %s', (input, expected) => {
    expect(text(input)).toBe(expected);
  });

  it('normalises IPv4-mapped addresses with a /96 or longer prefix to IPv4', () => {
    expect(text('::ffff:10.1.2.3')).toBe('10.1.2.3/32');
    expect(text('::FFFF:10.1.2.3/120')).toBe('10.1.2.0/24');
    expect(text('::ffff:0a01:0203/112')).toBe('10.1.0.0/16');
    expect(text('::ffff:0:0/96')).toBe('0.0.0.0/0');
    // Shorter prefixes cover more than the mapped range: they stay IPv6.
    expect(text('::ffff:10.1.2.3/80')).toBe('::/80');
  });

  it('formats RFC 5952 text', () => {
    expect(formatIPv6(new Uint8Array(16))).toBe('::');
    expect(formatIPv6(new Uint8Array([0x20, 0x01, 0x0d, 0xb8, ...new Array(12).fill(0)]))).toBe('2001:db8::');
  });
});

describe('parseCidr: refusals', () => {
  it('quotes the input in the message', () => {
    expect(reason('10.0.0.0/33')).toBe(
      'invalid CIDR "10.0.0.0/33": the prefix length must be 0 to 32 for IPv4',
    );
  });

  it.each([
    ['', 'empty'],
    [' 10.0.0.0/8', 'whitespace'],
    ['10.0.0.0/8 ', 'whitespace'],
    ['10.0.0.0 /8', 'whitespace'],
    ['10.0.0.0/33', '0 to 32'],
    ['2001:db8::/129', '0 to 128'],
    ['10.0.0.0/-1', 'decimal'],
    ['10.0.0.0/+8', 'decimal'],
    ['10.0.0.0/08', 'decimal'],
    ['10.0.0.0/', 'decimal'],
    ['10.0.0.0/8/8', 'decimal'],
    ['10.0.0.0/a', 'decimal'],
    ['010.0.0.0/8', 'leading zero'],
    ['10.0.0.01', 'leading zero'],
    ['10.0.0.256/32', 'above 255'],
    ['10.0.0/8', 'not an IPv4'],
    ['10.0.0.0.0/8', 'not an IPv4'],
    ['10.0.0.x', 'not an IPv4'],
    ['0x0a.0.0.0', 'not an IPv4'],
    ['example.com', 'not an IPv4'],
    ['fe80::1%eth0', 'zone ids'],
    ['fe80::1%eth0/64', 'zone ids'],
    ['1::2::3', 'not an IPv6'],
    [':::', 'not an IPv6'],
    ['1:2:3:4:5:6:7:8:9', 'not an IPv6'],
    ['1:2:3:4:5:6:7', 'not an IPv6'],
    ['1:2:3:4:5:6:7:8::', 'not an IPv6'],
    ['12345::', 'not an IPv6'],
    ['g::', 'not an IPv6'],
    [':1::', 'not an IPv6'],
    ['::ffff:010.1.2.3', 'leading zero'],
    ['::ffff:1.2.3', 'not an IPv4'],
    ['1.2.3.4::', 'not an IPv6'],
    ['/8', 'not an IPv4'],
    ['/', 'decimal'],
  ])('%j: %s', (input, expected) => {
    expect(reason(input)).toContain(expected);
    expect(reason(input)).toMatch(/^invalid CIDR ".*": /);
  });

  it('refuses more than 64 characters and shortens the echo', () => {
    const long = `2001:0db8:0000:0000:0000:0000:0000:0000/${'1'.repeat(30)}`;
    expect(long.length).toBeGreaterThan(64);
    expect(reason(long)).toBe(`invalid CIDR "${long.slice(0, 64)}…": longer than 64 characters`);
  });
});
