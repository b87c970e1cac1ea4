import { createHash } from 'node:crypto';

/** RFC 7638 thumbprint of an Ed25519 JWK, computed independently of the issuer's code. */
export function thumbprint(jwk: { crv: string; kty: string; x: string }): string {
  // Required members only, lexicographic order, no whitespace (RFC 7638 §3.2, RFC 8037 §2).
  const canonical = `{"crv":"${jwk.crv}","kty":"${jwk.kty}","x":"${jwk.x}"}`;
  return createHash('sha256').update(canonical).digest('base64url');
}
