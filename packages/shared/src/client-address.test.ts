import { describe, expect, it } from 'vitest';
import { throttleClient } from './client-address.ts';

describe('throttleClient', () => {
  it('counts an IPv4 address as itself', () => {
    expect(throttleClient('203.0.113.7')).toBe('203.0.113.7');
  });

  it('counts every address of one IPv6 /64 as one client, and another /64 as another', () => {
    const a = throttleClient('2001:db8:1:2:aaaa:bbbb:cccc:dddd');
    expect(throttleClient('2001:db8:1:2::1')).toBe(a);
    expect(throttleClient('2001:DB8:1:2:ffff:ffff:ffff:ffff')).toBe(a);
    expect(a).toBe('2001:db8:1:2:0:0:0:0/64');
    expect(throttleClient('2001:db8:1:3::1')).not.toBe(a);
  });

  it('takes the configured prefix, also one that cuts a group', () => {
    expect(throttleClient('2001:db8:1:2::1', 48)).toBe(throttleClient('2001:db8:1:ffff::1', 48));
    expect(throttleClient('2001:db8:1:2::1', 56)).toBe('2001:db8:1:0:0:0:0:0/56');
    expect(throttleClient('2001:db8:1:1ff::1', 56)).toBe('2001:db8:1:100:0:0:0:0/56');
    expect(throttleClient('2001:db8::1', 128)).toBe('2001:db8:0:0:0:0:0:1/128');
  });

  it('counts an IPv4-mapped IPv6 address as its IPv4 address', () => {
    expect(throttleClient('::ffff:198.51.100.4')).toBe('198.51.100.4');
  });

  it('ignores a zone and leaves what is not an address as it is', () => {
    expect(throttleClient('fe80::1%eth0')).toBe(throttleClient('fe80::2'));
    expect(throttleClient('')).toBe('');
    expect(throttleClient('not-an-ip')).toBe('not-an-ip');
  });
});
