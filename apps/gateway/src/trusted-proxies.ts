import { BlockList, isIPv4 } from 'node:net';

/**
 * Whether a peer address is one of GATEWAY_TRUSTED_PROXIES (addresses and CIDR blocks, as
 * config.ts validated them): the TLS-terminating proxies whose forwarded headers the gateway
 * believes. Always false with none configured.
 */
export function trustedProxyCheck(entries: readonly string[]): (address: string | undefined) => boolean {
  if (entries.length === 0) return () => false;
  const trusted = new BlockList();
  for (const entry of entries) {
    const [address = '', bits] = entry.split('/');
    const type = isIPv4(address) ? 'ipv4' : 'ipv6';
    if (bits === undefined) trusted.addAddress(address, type);
    else trusted.addSubnet(address, Number(bits), type);
  }
  return (raw) => {
    const address = raw?.replace(/^::ffff:/, '') ?? '';
    if (address === '') return false;
    return trusted.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
  };
}
