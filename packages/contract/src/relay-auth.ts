/**
 * moq-relay's session contract, as Relayplane speaks it at `POST /v1/relays/auth`
 * (docs/credentials.md, "Sessions"): the relay POSTs `connect`, `revalidate` and `end` for every
 * session and obeys the grant answered. Pure: the gateway parses with it, the issuer decides
 * with it, and the contract tests feed it upstream's cross-language vectors.
 */
import { PatternError, parsePattern } from './moq-pattern.ts';

/** The session events a relay sends. */
export const RELAY_SESSION_EVENTS = ['connect', 'revalidate', 'end'] as const;
export type RelaySessionEvent = (typeof RELAY_SESSION_EVENTS)[number];

/**
 * Transports upstream names; any other string is read as `unknown` (upstream does the same, so
 * a relay newer than this list still gets an answer).
 */
export const RELAY_TRANSPORTS = [
  'quic',
  'iroh',
  'websocket',
  'tcp',
  'unix',
  'http',
  'rtmp',
  'srt',
  'webrtc',
  'webtransport',
  'unknown',
] as const;
export type RelayTransport = (typeof RELAY_TRANSPORTS)[number];

export const RELAY_SESSION_ROLES = ['publisher', 'subscriber'] as const;

export function relayTransport(value: string): RelayTransport {
  return (RELAY_TRANSPORTS as readonly string[]).includes(value) ? (value as RelayTransport) : 'unknown';
}

/** A SETUP `AUTHORIZATION TOKEN` as the relay forwards it: kind 0 is out of band (a JWT). */
export interface SetupToken {
  kind: number;
  /** base64url, unpadded. */
  value: string;
}

/** Strict base64url without padding and without stray bits (upstream's own check). */
const BASE64URL_EXACT = /^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-][AQgw]|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048])?$/;

export function isSetupTokenValue(value: string): boolean {
  return BASE64URL_EXACT.test(value);
}

export type CredentialSource =
  | { ok: true; token: string }
  | { ok: true; token: undefined }
  | { ok: false; reason: string };

/**
 * The credential a session presents: `jwt=` in the raw query (the last non-empty one, not
 * URL-decoded: a JWT needs no encoding) or a SETUP token of kind 0. Both: they must be the same
 * credential. Neither: `token` undefined (the caller refuses).
 */
export function credentialOf(query: string | undefined, setup: SetupToken | undefined): CredentialSource {
  let fromQuery: string | undefined;
  for (const pair of (query ?? '').split('&')) {
    const eq = pair.indexOf('=');
    if (eq < 0 || pair.slice(0, eq) !== 'jwt') continue;
    const value = pair.slice(eq + 1);
    if (value !== '') fromQuery = value;
  }
  let fromSetup: string | undefined;
  if (setup) {
    if (setup.kind !== 0) return { ok: false, reason: `unsupported SETUP token kind ${setup.kind}` };
    if (!isSetupTokenValue(setup.value)) return { ok: false, reason: 'the SETUP token is not base64url' };
    fromSetup = Buffer.from(setup.value, 'base64url').toString('utf8');
  }
  if (fromQuery !== undefined && fromSetup !== undefined && fromQuery !== fromSetup) {
    return { ok: false, reason: 'two different credentials: jwt= in the query and a SETUP token' };
  }
  return { ok: true, token: fromQuery ?? fromSetup };
}

/** `/a//b/` → `a/b`; `""` and `/` → `""` (upstream's path normalisation). */
export function normalizeRelayPath(path: string): string {
  return path
    .split('/')
    .filter((segment) => segment !== '')
    .join('/');
}

/**
 * The grant's `root`: the project's own namespace, then the path the session dialed. Patterns
 * are relative to it, so a session reaches only its project's broadcasts, under the path it
 * asked for.
 */
export function grantRoot(projectId: string, path: string): string {
  const rest = normalizeRelayPath(path);
  return rest === '' ? projectId : `${projectId}/${rest}`;
}

/** What a relay obeys: upstream's grant, the fields Relayplane sends. */
export interface RelayGrant {
  publish?: string[];
  subscribe?: string[];
  root?: string;
  /** Unix seconds. */
  expires?: number;
  /** Seconds. */
  revalidate?: number;
  tier?: string;
}

/**
 * Upstream's validity rules for a grant (its `Grant::validate`), at `nowSeconds`: the reason a
 * relay would not obey it, or undefined. Relayplane checks every grant it sends against them.
 */
export function grantProblem(grant: RelayGrant, nowSeconds: number): string | undefined {
  if ((grant.publish ?? []).length === 0 && (grant.subscribe ?? []).length === 0)
    return 'a grant naming nothing is a refusal';
  if (grant.revalidate !== undefined && grant.expires === undefined) return 'revalidate without expires';
  if (grant.revalidate !== undefined && (!Number.isInteger(grant.revalidate) || grant.revalidate <= 0))
    return 'revalidate must be a positive whole number of seconds';
  if (grant.expires !== undefined && !Number.isInteger(grant.expires))
    return 'expires must be whole unix seconds';
  if (grant.expires !== undefined && grant.expires <= nowSeconds) return 'expires is in the past';
  for (const pattern of [...(grant.publish ?? []), ...(grant.subscribe ?? [])]) {
    const problem = patternProblem(pattern);
    if (problem) return `pattern ${JSON.stringify(pattern)}: ${problem}`;
  }
  return undefined;
}

/** Upstream's pattern grammar (moq-pattern.ts): the reason `pattern` is not one, or undefined. */
export function patternProblem(pattern: string): string | undefined {
  try {
    parsePattern(pattern);
    return undefined;
  } catch (err) {
    if (err instanceof PatternError) return err.message;
    throw err;
  }
}
