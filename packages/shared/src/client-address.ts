/**
 * The client a per-address throttle counts (docs/iam.md, "Login and sign-up throttling"): an
 * IPv4 address as itself; an IPv6 address by its network of `ipv6PrefixBits` (default /64, the
 * smallest block a provider hands one customer, so a host rotating through the 2^64 addresses of
 * its own network is one client). An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is its IPv4
 * address. Anything that is not an IP address is returned as it is (the callers' "unknown" marker).
 */
import { isIPv4, isIPv6 } from 'node:net';

/** `RELAYPLANE_THROTTLE_IPV6_PREFIX`'s default. */
export const DEFAULT_THROTTLE_IPV6_PREFIX = 64;

/** The eight 16-bit groups of an IPv6 address (no zone), or undefined. */
function ipv6Groups(address: string): number[] | undefined {
  const [head = '', tail] = address.split('::');
  if (address.split('::').length > 2) return undefined;
  const part = (text: string): number[] | undefined => {
    if (text === '') return [];
    const out: number[] = [];
    for (const piece of text.split(':')) {
      if (isIPv4(piece)) {
        const [a = 0, b = 0, c = 0, d = 0] = piece.split('.').map(Number);
        out.push((a << 8) | b, (c << 8) | d);
      } else if (/^[0-9a-f]{1,4}$/i.test(piece)) out.push(Number.parseInt(piece, 16));
      else return undefined;
    }
    return out;
  };
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  if (!left || !right) return undefined;
  const missing = 8 - left.length - right.length;
  if (tail === undefined ? missing !== 0 : missing < 0) return undefined;
  return [...left, ...new Array<number>(missing).fill(0), ...right];
}

export function throttleClient(ip: string, ipv6PrefixBits = DEFAULT_THROTTLE_IPV6_PREFIX): string {
  const address = ip.trim().toLowerCase().replace(/%.*$/, '');
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return ip;
  const groups = ipv6Groups(address);
  if (!groups) return ip;
  // IPv4-mapped: ::ffff:a.b.c.d is the IPv4 client a.b.c.d.
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    const [hi = 0, lo = 0] = groups.slice(6);
    return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  }
  const masked = groups.map((group, i) => {
    const bitsLeft = ipv6PrefixBits - i * 16;
    if (bitsLeft >= 16) return group;
    if (bitsLeft <= 0) return 0;
    return group & (0xffff << (16 - bitsLeft)) & 0xffff;
  });
  return `${masked.map((g) => g.toString(16)).join(':')}/${ipv6PrefixBits}`;
}
