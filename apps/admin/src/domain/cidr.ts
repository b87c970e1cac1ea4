/**
 * CIDR blocks for project IP allowlists. Pure.
 *
 * `parseCidr` accepts an IPv4 (`a.b.c.d/n`, n 0..32) or IPv6 (`…/n`, n 0..128) block, or a
 * bare address meaning one host (/32 or /128), and answers its canonical form: the NETWORK
 * address (host bits cleared) with the prefix length, IPv4 dotted decimal, IPv6 per RFC 5952
 * (lowercase, no leading zeros, the longest run of two or more zero groups — the first on a
 * tie — written `::`). So two ways of writing one network store as one entry.
 *
 * IPv4-mapped IPv6 (`::ffff:0:0/96`, in dotted or hex form) with a prefix of /96 or longer is
 * normalised to the IPv4 block it maps (`::ffff:10.1.2.3/120` → `10.1.2.0/24`): a dual-stack
 * listener reports IPv4 clients that way, and one entry must match them either way. A shorter
 * prefix covers more than the mapped range and stays IPv6.
 *
 * Refused (with the reason): empty, longer than 64 characters, any whitespace, zone ids
 * (`%eth0`), IPv4 octets with leading zeros or above 255, prefix lengths out of range or with
 * leading zeros or signs, and anything else that is not an address.
 */
import { isIPv4, isIPv6 } from 'node:net';
import type { Checked } from './validation.ts';

const CIDR_MAX_LENGTH = 64;

export interface Cidr {
  family: 4 | 6;
  /** The network address, 4 or 16 bytes, host bits cleared. */
  bytes: Uint8Array;
  prefix: number;
  /** Canonical text, e.g. `10.1.0.0/16`, `2001:db8::/32`. */
  text: string;
}

/** The 422 message for an input that is not a CIDR block (the input is echoed, quoted). */
function invalidCidrMessage(input: string, reason: string): string {
  const shown = input.length > CIDR_MAX_LENGTH ? `${input.slice(0, CIDR_MAX_LENGTH)}…` : input;
  return `invalid CIDR ${JSON.stringify(shown)}: ${reason}`;
}

const PREFIX_PATTERN = /^(0|[1-9][0-9]{0,2})$/;
const OCTET_PATTERN = /^(0|[1-9][0-9]{0,2})$/;
const GROUP_PATTERN = /^[0-9a-fA-F]{1,4}$/;
const WHITESPACE = /\s/u;

type Parsed = { ok: true; bytes: Uint8Array } | { ok: false; reason: string };

function parseIPv4(text: string): Parsed {
  const parts = text.split('.');
  if (parts.length !== 4) return { ok: false, reason: 'not an IPv4 or IPv6 address' };
  const bytes = new Uint8Array(4);
  for (const [i, part] of parts.entries()) {
    if (!OCTET_PATTERN.test(part)) {
      return {
        ok: false,
        reason: /^[0-9]+$/.test(part)
          ? `IPv4 octet "${part}" has a leading zero`
          : 'not an IPv4 or IPv6 address',
      };
    }
    const value = Number(part);
    if (value > 255) return { ok: false, reason: `IPv4 octet "${part}" is above 255` };
    bytes[i] = value;
  }
  if (!isIPv4(text)) return { ok: false, reason: 'not an IPv4 address' };
  return { ok: true, bytes };
}

function parseGroups(text: string): number[] | undefined {
  if (text === '') return [];
  const groups: number[] = [];
  for (const group of text.split(':')) {
    if (!GROUP_PATTERN.test(group)) return undefined;
    groups.push(Number.parseInt(group, 16));
  }
  return groups;
}

function parseIPv6(text: string): Parsed {
  const bad: Parsed = { ok: false, reason: 'not an IPv6 address' };
  if (text.includes('%')) return { ok: false, reason: 'zone ids are not allowed' };
  // An embedded IPv4 address may end the address (`::ffff:10.1.2.3`): two groups.
  let head = text;
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const v4 = parseIPv4(text.slice(lastColon + 1));
    if (!v4.ok) return v4;
    const view = new DataView(v4.bytes.buffer);
    tail = [view.getUint16(0), view.getUint16(2)];
    head = text.slice(0, lastColon + 1);
    // `…:` before the IPv4 part: drop the separator unless it is half of `::`.
    if (!head.endsWith('::')) head = head.slice(0, -1);
  }
  const [before = '', after, ...more] = head.split('::');
  if (more.length > 0) return bad;
  let groups: number[];
  if (after !== undefined) {
    const left = parseGroups(before);
    const right = parseGroups(after);
    if (!left || !right) return bad;
    const missing = 8 - left.length - right.length - tail.length;
    // `::` stands for at least one zero group.
    if (missing < 1) return bad;
    groups = [...left, ...new Array<number>(missing).fill(0), ...right, ...tail];
  } else {
    const all = parseGroups(before);
    if (!all) return bad;
    groups = [...all, ...tail];
    if (groups.length !== 8) return bad;
  }
  if (!isIPv6(text)) return bad;
  const bytes = new Uint8Array(16);
  for (const [i, g] of groups.entries()) {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  }
  return { ok: true, bytes };
}

function clearHostBits(bytes: Uint8Array, prefix: number): Uint8Array {
  return bytes.map((byte, i) => {
    const bits = Math.min(8, Math.max(0, prefix - 8 * i));
    return byte & ((0xff << (8 - bits)) & 0xff);
  });
}

/** RFC 5952 text of 16 bytes. */
export function formatIPv6(bytes: Uint8Array): string {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(view.getUint16(i));
  let bestStart = -1;
  let bestLength = 1; // A single zero group is never compressed.
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

function formatIPv4(bytes: Uint8Array): string {
  return Array.from(bytes).join('.');
}

function isIPv4Mapped(bytes: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

function cidr(family: 4 | 6, address: Uint8Array, prefix: number): Cidr {
  const bytes = clearHostBits(address, prefix);
  const text = `${family === 4 ? formatIPv4(bytes) : formatIPv6(bytes)}/${prefix}`;
  return { family, bytes, prefix, text };
}

/** The canonical network of `input`, or why it is not a CIDR block (the whole 422 message). */
export function parseCidr(input: string): Checked<Cidr> {
  const fail = (reason: string): Checked<Cidr> => ({ ok: false, message: invalidCidrMessage(input, reason) });
  if (input.length === 0) return fail('empty');
  if (input.length > CIDR_MAX_LENGTH) return fail(`longer than ${CIDR_MAX_LENGTH} characters`);
  if (WHITESPACE.test(input)) return fail('contains whitespace');
  const slash = input.indexOf('/');
  const address = slash < 0 ? input : input.slice(0, slash);
  const prefixText = slash < 0 ? undefined : input.slice(slash + 1);
  const family = address.includes(':') ? 6 : 4;
  const maxPrefix = family === 4 ? 32 : 128;
  let prefix = maxPrefix;
  if (prefixText !== undefined) {
    if (!PREFIX_PATTERN.test(prefixText)) return fail('the prefix length must be a decimal number');
    prefix = Number(prefixText);
    if (prefix > maxPrefix) return fail(`the prefix length must be 0 to ${maxPrefix} for IPv${family}`);
  }
  const parsed = family === 4 ? parseIPv4(address) : parseIPv6(address);
  if (!parsed.ok) return fail(parsed.reason);
  if (family === 6 && prefix >= 96 && isIPv4Mapped(parsed.bytes)) {
    return { ok: true, value: cidr(4, parsed.bytes.slice(12), prefix - 96) };
  }
  return { ok: true, value: cidr(family, parsed.bytes, prefix) };
}
