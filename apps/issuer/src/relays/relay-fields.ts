/** Validation and formatting of relay fields, shared by the relays file and registration. Pure. */
import { isIP } from 'node:net';

const REGION_PATTERN = /^[a-z0-9-]{1,32}$/;
/** What a request with a malformed `region` is told. */
export const REGION_MESSAGE = 'region must be 1-32 lowercase letters, digits or hyphens';
export const MAX_HOST_LENGTH = 253;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export function isRegion(value: string): boolean {
  return REGION_PATTERN.test(value);
}

/**
 * The canonical form of a host (lowercase hostname, dotted IPv4, compressed IPv6 without
 * brackets), or undefined when it is none of these. `[::1]` is accepted as `::1`.
 */
export function normalizeHost(value: string): string | undefined {
  let host = value.trim().toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host.length === 0 || host.length > MAX_HOST_LENGTH) return undefined;
  const ip = isIP(host);
  if (ip === 4) return host;
  if (ip === 6) {
    if (host.includes('%')) return undefined; // zone ids mean nothing off this machine
    return new URL(`https://[${host}]/`).hostname.slice(1, -1);
  }
  const labels = host.endsWith('.') ? host.slice(0, -1).split('.') : host.split('.');
  if (!labels.every((l) => LABEL.test(l))) return undefined;
  // A name whose last label is numeric reads as an (invalid) IPv4 address.
  if (/^\d+$/.test(labels[labels.length - 1] ?? '')) return undefined;
  return labels.join('.');
}

export function isPort(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65_535;
}

/** `host:port`, IPv6 hosts in brackets. */
export function hostPort(host: string, port: number): string {
  return `${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
}

export function relayUrl(host: string, port: number): string {
  return `https://${hostPort(host, port)}`;
}

/** Parses `host:port` (`[v6]:port` for IPv6) into its canonical form, or undefined. */
export function parseHostPort(value: string): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(value.trim());
  if (!m) return undefined;
  const host = normalizeHost(m[1] ?? '');
  const port = Number(m[2]);
  if (host === undefined || !isPort(port)) return undefined;
  // Brackets are for IPv6 and only for it.
  if ((m[1]?.startsWith('[') ?? false) !== (isIP(host) === 6)) return undefined;
  return { host, port };
}
