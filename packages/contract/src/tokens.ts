/**
 * Bearer token formats. Every secret we hand out names its type in a prefix and ends in
 * a CRC-32 checksum, so a mistyped or truncated token is rejected without a lookup and a
 * leaked one is easy to find with a scanner. Only the SHA-256 of a token is stored.
 */
import { hash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

export const TOKEN_PREFIXES = {
  userSession: 'rpu_',
  identity: 'rpi_',
  bot: 'rpb_',
  cli: 'rpc_',
  relayNode: 'rpr_',
  /** The `mfa_token` between the two login steps: opens nothing but the second step. */
  loginChallenge: 'rpm_',
} as const;

export type TokenKind = keyof typeof TOKEN_PREFIXES;

const BODY_HEX = 64;
const CHECKSUM_HEX = 8;
const TOKEN_PATTERN = /^(rp[uibcrm]_)([0-9a-f]{64})([0-9a-f]{8})$/;

function checksum(prefix: string, body: string): string {
  return crc32(prefix + body)
    .toString(16)
    .padStart(CHECKSUM_HEX, '0');
}

export function newToken(kind: TokenKind): string {
  const prefix = TOKEN_PREFIXES[kind];
  const body = randomBytes(BODY_HEX / 2).toString('hex');
  return prefix + body + checksum(prefix, body);
}

/** The token's kind when it is well formed and its checksum holds; otherwise undefined. */
export function parseToken(token: string): TokenKind | undefined {
  const m = TOKEN_PATTERN.exec(token);
  if (!m) return undefined;
  const [, prefix = '', body = '', sum] = m;
  if (checksum(prefix, body) !== sum) return undefined;
  for (const [kind, p] of Object.entries(TOKEN_PREFIXES)) {
    if (p === prefix) return kind as TokenKind;
  }
  return undefined;
}

/** What is stored instead of a token: its SHA-256, hex. Tokens carry 256 random bits, so no salt or KDF is needed. */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}
