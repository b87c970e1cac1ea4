/** Signing keys and credentials for tests: good ones through jose, bad ones by hand. */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, type JWTPayload, SignJWT } from 'jose';

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicJwk: { kty: 'OKP'; crv: 'Ed25519'; x: string; kid: string; alg: 'EdDSA'; use: 'sig' };
}

export async function generateSigningKey(): Promise<SigningKey> {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const { x } = publicKey.export({ format: 'jwk' });
  if (typeof x !== 'string') throw new Error('no x in the Ed25519 JWK');
  const kid = await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x }, 'sha256');
  return { kid, privateKey, publicJwk: { kty: 'OKP', crv: 'Ed25519', x, kid, alg: 'EdDSA', use: 'sig' } };
}

let serial = 0;

/** The claims the issuer puts in a credential, valid at `nowMs` for ten minutes. */
export function credentialClaims(nowMs: number, overrides: JWTPayload = {}): JWTPayload {
  serial += 1;
  const iat = Math.floor(nowMs / 1000);
  const claims: JWTPayload = {
    iss: 'relayplane',
    aud: 'relayplane-relay',
    sub: 'prj_7hQ2',
    jti: `crd_test${serial}`,
    iat,
    nbf: iat,
    exp: iat + 600,
    tid: 'ten_9xK1',
    pid: 'prj_7hQ2',
    scope: 'relay:session relay:subscribe',
    mode: 'live',
    akid: 'key_3mN8',
    // moq-token's path claims: the whole project, to the one role relay:subscribe narrows to.
    root: 'prj_7hQ2',
    get: [''],
    ...overrides,
  };
  // Another project's credential carries that project's root.
  if (overrides.pid !== undefined && overrides.root === undefined) claims.root = overrides.pid;
  return claims;
}

/** A credential exactly as the issuer signs it: EdDSA, typ JWT, kid = thumbprint. */
export function mint(
  key: SigningKey,
  claims: JWTPayload,
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: key.kid, ...header })
    .sign(key.privateKey);
}

export function b64url(value: unknown): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

/** Assembles a compact JWS from a header, payload and a signer of the signing input. */
export function craft(
  header: Record<string, unknown>,
  payload: JWTPayload,
  sign: (signingInput: Buffer) => Buffer,
): string {
  const signingInput = `${b64url(header)}.${b64url(payload)}`;
  return `${signingInput}.${sign(Buffer.from(signingInput)).toString('base64url')}`;
}
