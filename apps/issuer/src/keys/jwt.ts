/**
 * Relay credentials as compact JWS, with node:crypto only (jose stays off this path).
 * The contract is docs/credentials.md: header `{"alg":"EdDSA","typ":"JWT","kid"}` and the
 * claims below, in this order.
 */
import { type KeyObject, randomBytes, sign, verify } from 'node:crypto';
import { isKeyMode, type KeyMode } from '@relayplane/contract/contract';
import { inChildSpan, isTracingEnabled, type Span } from '@relayplane/shared/tracing';

/**
 * Clock skew accepted on `nbf` when verifying. None on `exp`: the service that issued a
 * credential shares its clock, and the contract says a credential stops being valid at its
 * `expires_at` (relays, on other clocks, use the verifier's documented leeway).
 */
const VERIFY_LEEWAY_SECONDS = 30;
/** Longer inputs are refused before any parsing. */
const MAX_TOKEN_LENGTH = 8192;

export interface CredentialClaims {
  iss: string;
  sub: string;
  aud: string;
  jti: string;
  iat: number;
  nbf: number;
  exp: number;
  tid: string;
  pid: string;
  scope: string;
  mode: KeyMode;
  akid: string;
  rgn?: string;
  /** moq-token's path claims (credential-paths.ts): `<project id>[/<root>]`, then put/get or publish/subscribe. */
  root?: string;
  put?: string[];
  get?: string[];
  publish?: string[];
  subscribe?: string[];
}

const PATH_LISTS = ['put', 'get', 'publish', 'subscribe'] as const;
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string');

// Same alphabet as @relayplane/contract/ids (32 symbols, so every one is equally likely).
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const JTI_PATTERN = /^crd_[0-9a-z]{20}$/;
const KID_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const SEGMENT = /^[A-Za-z0-9_-]+$/;

// CSPRNG output drawn 4 KiB at a time (as crypto.randomUUID does): one call into the
// system's generator per ~200 credentials instead of one per credential.
const POOL_BYTES = 4096;
const JTI_BYTES = 20;
let pool = Buffer.alloc(0);
let poolOffset = POOL_BYTES;

/** `crd_` + 20 random base32 characters (100 bits). */
export function newJti(): string {
  if (poolOffset + JTI_BYTES > pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolOffset = 0;
  }
  let out = 'crd_';
  for (let i = poolOffset; i < poolOffset + JTI_BYTES; i++) out += ALPHABET[(pool[i] ?? 0) & 31];
  poolOffset += JTI_BYTES;
  return out;
}

export function isJti(value: string): boolean {
  return JTI_PATTERN.test(value);
}

/** base64url of the header, computed once per signing key. */
export function encodedHeader(kid: string): string {
  return Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'JWT', kid })).toString('base64url');
}

/**
 * Signs `claims` under the precomputed header of the key: one Ed25519 signature, no async work.
 * With tracing on, in a `sign credential` span under the issuance's (docs/tracing.md).
 */
export function signCredential(header: string, claims: CredentialClaims, privateKey: KeyObject): string {
  if (!isTracingEnabled()) return signed(header, claims, privateKey);
  return inChildSpan('sign credential', signingAttributes, () => signed(header, claims, privateKey));
}

function signingAttributes(span: Span): void {
  span.setAttribute('relayplane.signing.alg', 'EdDSA');
}

function signed(header: string, claims: CredentialClaims, privateKey: KeyObject): string {
  const input = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  const signature = sign(null, Buffer.from(input), privateKey);
  return `${input}.${signature.toString('base64url')}`;
}

export interface VerifyOptions {
  issuer: string;
  audience: string;
  /** Seconds since the epoch. */
  now: number;
  /** The published key for `kid` (active, next or previous), or undefined. */
  keyFor(kid: string): KeyObject | undefined;
}

function parseSegment(segment: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

const isString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const isSeconds = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * Verifies signature, header, expiry and issuer/audience (not revocation). Returns the
 * claims, or undefined for anything else: callers never learn why a token failed.
 */
export function verifyCredential(token: string, options: VerifyOptions): CredentialClaims | undefined {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) return undefined;
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  const [h, p, s] = parts as [string, string, string];
  if (!SEGMENT.test(h) || !SEGMENT.test(p) || !SEGMENT.test(s)) return undefined;
  const header = parseSegment(h);
  // One algorithm, chosen here and never by the token; no key material from the token.
  if (header?.alg !== 'EdDSA' || header.typ !== 'JWT') return undefined;
  if ('jku' in header || 'x5u' in header || 'jwk' in header || 'x5c' in header || 'crit' in header) {
    return undefined;
  }
  const kid = header.kid;
  if (typeof kid !== 'string' || !KID_PATTERN.test(kid)) return undefined;
  const key = options.keyFor(kid);
  if (!key) return undefined;
  const signature = Buffer.from(s, 'base64url');
  if (signature.length !== 64) return undefined;
  let valid = false;
  try {
    valid = verify(null, Buffer.from(`${h}.${p}`), key, signature);
  } catch {
    return undefined;
  }
  if (!valid) return undefined;
  const c = parseSegment(p);
  if (!c) return undefined;
  if (c.iss !== options.issuer || c.aud !== options.audience) return undefined;
  if (!isSeconds(c.exp) || !isSeconds(c.nbf) || !isSeconds(c.iat)) return undefined;
  if (c.exp <= options.now) return undefined;
  if (c.nbf > options.now + VERIFY_LEEWAY_SECONDS) return undefined;
  if (!isString(c.jti) || !isJti(c.jti)) return undefined;
  if (!isString(c.sub) || !isString(c.tid) || !isString(c.pid) || !isString(c.akid)) return undefined;
  if (c.sub !== c.pid) return undefined;
  if (typeof c.scope !== 'string') return undefined;
  if (typeof c.mode !== 'string' || !isKeyMode(c.mode)) return undefined;
  if (c.rgn !== undefined && !isString(c.rgn)) return undefined;
  const claims: CredentialClaims = {
    iss: options.issuer,
    sub: c.sub,
    aud: options.audience,
    jti: c.jti,
    iat: c.iat,
    nbf: c.nbf,
    exp: c.exp,
    tid: c.tid,
    pid: c.pid,
    scope: c.scope,
    mode: c.mode,
    akid: c.akid,
  };
  if (c.rgn !== undefined) claims.rgn = c.rgn;
  if (c.root !== undefined) {
    if (typeof c.root !== 'string') return undefined;
    claims.root = c.root;
  }
  for (const name of PATH_LISTS) {
    const value = c[name];
    if (value === undefined) continue;
    if (!isStringList(value)) return undefined;
    claims[name] = value;
  }
  return claims;
}
