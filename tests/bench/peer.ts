/**
 * Starts the peer (peer-oidc.ts) as its own process and checks that it issues what the comparison
 * assumes before anything is measured: a token request answers a JWT access token whose header
 * says EdDSA, that verifies against the provider's published JWKS (found through its discovery
 * document), for the requested resource, from the provider's issuer. Anything else fails the
 * bench: a ratio to a peer that issues something else would mean nothing.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from 'jose';
import { freePort } from '../support/ports.ts';
import { type Proc, ROOT, startProcess } from '../support/processes.ts';

export interface Peer {
  proc: Proc;
  /** The token endpoint. */
  tokenUrl: string;
  /** What every token request sends (autocannon's method, headers and body). */
  request: { method: 'POST'; headers: Record<string, string>; body: string };
  /** The oidc-provider version that ran. */
  version: string;
  /** What one token looked like, for the report. */
  sample: {
    alg: string;
    kid: string | undefined;
    aud: unknown;
    scope: unknown;
    expires_in: number;
    bytes: number;
  };
}

const RESOURCE = 'https://api.bench.relayplane.test/';

/** Resolves with the first match of `pattern` in the process's output; rejects if it exits or times out. */
export async function awaitOutput(proc: Proc, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const start = Date.now();
  for (;;) {
    const match = proc.output().match(pattern);
    if (match) return match;
    if (proc.child.exitCode !== null || proc.child.signalCode !== null)
      throw new Error(
        `${proc.name} exited (${proc.child.exitCode ?? proc.child.signalCode}):\n${proc.output()}`,
      );
    if (Date.now() - start > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${proc.name}:\n${proc.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function startPeer(): Promise<Peer> {
  const clientId = 'bench';
  const clientSecret = randomBytes(24).toString('base64url');
  const proc = startProcess('bench-peer-oidc', 'tests/bench/peer-oidc.ts', {
    PORT: String(await freePort()),
    PEER_CLIENT_ID: clientId,
    PEER_CLIENT_SECRET: clientSecret,
    PEER_RESOURCE: RESOURCE,
    NODE_ENV: 'production',
  });
  try {
    const [, base] = await awaitOutput(proc, /listening (http:\/\/\S+)/, 20_000);
    const request = {
      method: 'POST' as const,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`,
      },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: RESOURCE,
        scope: 'api:read',
      }).toString(),
    };
    const discovery = (await (await fetch(`${base}/.well-known/openid-configuration`)).json()) as {
      issuer: string;
      jwks_uri: string;
      token_endpoint: string;
    };
    const tokenUrl: string = discovery.token_endpoint;
    const sample = await verifyToken(discovery, tokenUrl, request);
    const version = JSON.parse(
      readFileSync(join(ROOT, 'tests', 'node_modules', 'oidc-provider', 'package.json'), 'utf8'),
    ).version;
    return { proc, tokenUrl, request, version, sample };
  } catch (err) {
    await proc.stop();
    throw err;
  }
}

async function verifyToken(
  discovery: { issuer: string; jwks_uri: string },
  tokenUrl: string,
  request: Peer['request'],
): Promise<Peer['sample']> {
  const res = await fetch(tokenUrl, request);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`the peer's token endpoint answered ${res.status}: ${text}`);
  const answer = JSON.parse(text);
  const token: unknown = answer.access_token;
  if (typeof token !== 'string' || token.split('.').length !== 3)
    throw new Error(`the peer did not answer a JWT access token: ${text}`);
  const header = decodeProtectedHeader(token);
  if (header.alg !== 'EdDSA')
    throw new Error(`the peer's access token is signed with ${header.alg}, not EdDSA`);
  const jwks = (await (await fetch(discovery.jwks_uri)).json()) as JSONWebKeySet;
  if (!jwks.keys?.some((k) => k.kty === 'OKP' && k.crv === 'Ed25519'))
    throw new Error(`the peer's JWKS has no Ed25519 key: ${JSON.stringify(jwks)}`);
  const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
    algorithms: ['EdDSA'],
    issuer: discovery.issuer,
    audience: RESOURCE,
  });
  return {
    alg: header.alg,
    kid: header.kid,
    aud: payload.aud,
    scope: payload.scope,
    expires_in: answer.expires_in,
    bytes: Buffer.byteLength(token),
  };
}
