/**
 * SPIFFE identities of our services and the PEM checks of their certificates (grpc-tls.ts reads
 * the files and reloads them; this says who a certificate names and whether it can serve):
 * `spiffe://<trust domain>/<app>` as a certificate's one URI SAN, a key that is the certificate's,
 * a chain up to a CA of the bundle.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import { SERVICES, type ServiceName } from '@relayplane/contract/contract';

/** Named in the chain problem: the file a peer's chain must end at. */
const CA_VARIABLE = 'RELAYPLANE_GRPC_TLS_CA_FILE';
const APPS = Object.values(SERVICES) as readonly ServiceName[];

/** SPIFFE trust domain names: lowercase letters, digits, `.`, `-` and `_` (SPIFFE ID spec, 2.1). */
export const TRUST_DOMAIN = /^[a-z0-9._-]{1,255}$/;

export function spiffeId(trustDomain: string, app: ServiceName): string {
  return `spiffe://${trustDomain}/${app}`;
}

/**
 * The URI SAN of a certificate, from Node's `subjectaltname` string (`URI:…, DNS:…`), or
 * undefined when it has none or more than one (an X509-SVID has exactly one). Node quotes a
 * value holding a comma or a quote as a JSON string (commas escaped), so splitting on ", "
 * cannot be fooled by a crafted SAN.
 */
export function uriSanOf(subjectAltName: string | undefined): string | undefined {
  if (!subjectAltName) return undefined;
  const uris: string[] = [];
  for (const entry of subjectAltName.split(', ')) {
    if (!entry.startsWith('URI:')) continue;
    const value = entry.slice(4);
    if (!value.startsWith('"')) {
      uris.push(value);
      continue;
    }
    try {
      uris.push(String(JSON.parse(value)));
    } catch {
      return undefined;
    }
  }
  return uris.length === 1 ? uris[0] : undefined;
}

/** Who a peer is: its SPIFFE ID (if its certificate has one) and the app it names in our trust domain. */
export interface PeerIdentity {
  /** The certificate's one URI SAN; undefined when it has none (or several). */
  id: string | undefined;
  /** One of our four apps when `id` is `spiffe://<our trust domain>/<app>` exactly. */
  app: ServiceName | undefined;
}

export function peerIdentity(subjectAltName: string | undefined, trustDomain: string): PeerIdentity {
  const id = uriSanOf(subjectAltName);
  const prefix = `spiffe://${trustDomain}/`;
  const rest = id?.startsWith(prefix) ? id.slice(prefix.length) : undefined;
  const app = APPS.find((a) => a === rest);
  return { id, app };
}

// ------------------------------------------------------------------ certificates

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

export function certificatesIn(pem: Buffer): X509Certificate[] {
  return (pem.toString('latin1').match(PEM_CERTIFICATE) ?? []).map((block) => new X509Certificate(block));
}

/** What is wrong with a CA bundle, or undefined when it holds at least one CA certificate and nothing unreadable. */
export function checkCa(pem: Buffer): string | undefined {
  try {
    const certs = certificatesIn(pem);
    if (certs.length === 0) return 'holds no PEM certificate';
    if (!certs.some((c) => c.ca)) return 'holds no CA certificate (basicConstraints CA:TRUE)';
    return undefined;
  } catch (err) {
    return `holds a certificate that cannot be parsed (${(err as Error).message})`;
  }
}

/**
 * What is wrong with a certificate and key for `config.app`, or undefined: the key must be the
 * certificate's (a problem starting "key"), the certificate current and its one URI SAN
 * `spiffe://<trust domain>/<app>`.
 */
export function checkIdentity(
  config: { trustDomain: string; app: ServiceName },
  cert: Buffer,
  key: Buffer,
): string | undefined {
  let leaf: X509Certificate | undefined;
  try {
    leaf = certificatesIn(cert)[0];
  } catch (err) {
    return `holds a certificate that cannot be parsed (${(err as Error).message})`;
  }
  if (!leaf) return 'holds no PEM certificate';
  try {
    if (!leaf.checkPrivateKey(createPrivateKey(key))) return 'key is not the private key of the certificate';
    createSecureContext({ cert, key });
  } catch (err) {
    return `key cannot be used with the certificate (${(err as Error).message})`;
  }
  const expected = spiffeId(config.trustDomain, config.app);
  const found = uriSanOf(leaf.subjectAltName);
  if (found !== expected) {
    return `holds a certificate for ${found ?? 'no single URI SAN'}; this ${config.app} must present ${expected}`;
  }
  if (Date.parse(leaf.validTo) <= Date.now()) return `holds a certificate that expired at ${leaf.validTo}`;
  return undefined;
}

/** Whether the certificate (and the intermediates after it) chain up to a certificate of the CA bundle. */
export function checkChain(cert: Buffer, ca: Buffer): string | undefined {
  const [leaf, ...intermediates] = certificatesIn(cert);
  const roots = certificatesIn(ca);
  let current = leaf;
  for (let depth = 0; current && depth < 10; depth++) {
    const issued = (c: X509Certificate) => current?.checkIssued(c) && current.verify(c.publicKey);
    if (roots.some(issued)) return undefined;
    current = intermediates.find(issued);
  }
  return `holds a certificate that does not chain to a CA of ${CA_VARIABLE}`;
}
