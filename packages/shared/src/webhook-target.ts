/**
 * Where a webhook may be sent (issue 34, SSRF safety): an `https://` URL whose host resolves, at
 * send time, only to public addresses. `http://` and loopback addresses only where the operator
 * allows loopback (RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: local receivers in development and
 * tests). Private, link-local, unique-local, carrier-grade NAT, multicast, reserved and
 * unspecified addresses are never a target; IPv4-mapped IPv6 addresses count as their IPv4.
 * Checked on every attempt (DNS may change between them); the sender then connects to the
 * address checked here, not to a second resolution of the name.
 */
import { BlockList, isIP } from 'node:net';

export interface TargetPolicy {
  /** `http://` and loopback addresses allowed (local receivers). */
  allowLoopback: boolean;
}

/** Resolves a host name to every address it has (node:dns/promises `lookup` with `all: true`). */
export type Resolve = (host: string) => Promise<{ address: string; family: number }[]>;

export type TargetDecision = { ok: true; url: URL; addresses: string[] } | { ok: false; reason: string };

const NEVER = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NEVER.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  NEVER.addSubnet(net, bits, 'ipv6');

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** The address as the lists see it: IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as its IPv4. */
function plain(address: string): { address: string; type: 'ipv4' | 'ipv6' } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return { address: mapped[1], type: 'ipv4' };
  return { address, type: isIP(address) === 6 ? 'ipv6' : 'ipv4' };
}

/** Why `address` may not be a webhook target under `policy`, or undefined. */
export function addressProblem(address: string, policy: TargetPolicy): string | undefined {
  if (isIP(address) === 0) return `${address} is not an IP address`;
  const { address: a, type } = plain(address);
  if (LOOPBACK.check(a, type)) return policy.allowLoopback ? undefined : `${address} is a loopback address`;
  if (NEVER.check(a, type)) return `${address} is a private, link-local or reserved address`;
  return undefined;
}

/** Whether `raw` is a URL a webhook endpoint may have (checked at creation; addresses at send time). */
export function urlProblem(raw: string, policy: TargetPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url must be an absolute URL';
  }
  if (url.username || url.password) return 'url must not carry credentials';
  if (url.hash) return 'url must not have a fragment';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && policy.allowLoopback) return undefined;
  return policy.allowLoopback
    ? 'url must be https:// (or http:// to a loopback receiver)'
    : 'url must be https://';
}

/**
 * The decision at send time: the URL's scheme, then every address its host resolves to (all
 * must be allowed: a name with one private address among public ones is refused). An `http://`
 * URL must resolve to loopback only.
 */
export async function checkTarget(
  raw: string,
  policy: TargetPolicy,
  resolve: Resolve,
): Promise<TargetDecision> {
  const problem = urlProblem(raw, policy);
  if (problem) return { ok: false, reason: problem };
  const url = new URL(raw);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await resolve(host)).map((r) => r.address);
  } catch (err) {
    return { ok: false, reason: `${host} does not resolve (${(err as Error).message})` };
  }
  if (addresses.length === 0) return { ok: false, reason: `${host} does not resolve` };
  for (const address of addresses) {
    const refused = addressProblem(address, policy);
    if (refused) return { ok: false, reason: refused };
    if (url.protocol === 'http:') {
      const { address: a, type } = plain(address);
      if (!LOOPBACK.check(a, type))
        return { ok: false, reason: `http:// is only for loopback receivers (${address})` };
    }
  }
  return { ok: true, url, addresses };
}
