/**
 * A relay's client certificate as a trusted TLS-terminating proxy forwards it (docs/credentials.md,
 * "Setting up a relay"): the gateway serves plain HTTP behind the ingress, so mutual TLS ends
 * there and the proxy vouches for the certificate it verified. Believed only from a peer in
 * GATEWAY_TRUSTED_PROXIES; the same headers from anyone else are ignored.
 *
 * - `X-Forwarded-Client-Cert` (Envoy, Istio, Contour): one element whose `Hash=` is the SHA-256
 *   of the certificate's DER (hex). Several elements (a chain of proxies appending) are refused:
 *   which one speaks for the relay would be a guess.
 * - `ssl-client-cert` (ingress-nginx with `auth-tls-pass-certificate-to-upstream`): the URL-encoded
 *   PEM, taken only with `ssl-client-verify: SUCCESS`; its SHA-256 computed here.
 */
import { X509Certificate } from 'node:crypto';
import { AppError } from '@relayplane/contract/errors';
import type { FastifyRequest } from 'fastify';

const XFCC_HASH = /(?:^|;)\s*Hash=([0-9A-Fa-f]{64})\s*(?:;|$)/;

/** The SHA-256 (lowercase hex) of the client certificate forwarded for `request`, if any. */
export function forwardedClientCertificate(
  request: FastifyRequest,
  trusted: (address: string | undefined) => boolean,
): string | undefined {
  const xfcc = request.headers['x-forwarded-client-cert'];
  const nginx = request.headers['ssl-client-cert'];
  if (xfcc === undefined && nginx === undefined) return undefined;
  if (!trusted(request.socket.remoteAddress)) return undefined;
  if (typeof xfcc === 'string') {
    if (splitElements(xfcc).length !== 1)
      throw new AppError('unauthenticated', 'X-Forwarded-Client-Cert must carry exactly one element');
    const hash = XFCC_HASH.exec(xfcc)?.[1];
    if (!hash)
      throw new AppError('unauthenticated', 'X-Forwarded-Client-Cert carries no Hash= of the certificate');
    return hash.toLowerCase();
  }
  if (typeof nginx === 'string') {
    if (request.headers['ssl-client-verify'] !== 'SUCCESS')
      throw new AppError(
        'unauthenticated',
        'the forwarded client certificate was not verified (ssl-client-verify)',
      );
    try {
      return new X509Certificate(decodeURIComponent(nginx)).fingerprint256.replaceAll(':', '').toLowerCase();
    } catch {
      throw new AppError('unauthenticated', 'ssl-client-cert is not a URL-encoded PEM certificate');
    }
  }
  throw new AppError('unauthenticated', 'a forwarded client certificate header was sent twice');
}

/** XFCC elements: comma-separated, commas inside quoted values (a Subject) not counting. */
function splitElements(header: string): string[] {
  const out: string[] = [];
  let quoted = false;
  let start = 0;
  for (let i = 0; i < header.length; i++) {
    const c = header[i];
    if (c === '\\') i++;
    else if (c === '"') quoted = !quoted;
    else if (c === ',' && !quoted) {
      out.push(header.slice(start, i));
      start = i + 1;
    }
  }
  out.push(header.slice(start));
  return out.filter((e) => e.trim() !== '');
}
