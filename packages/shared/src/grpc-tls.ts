/**
 * Mutual TLS on every gRPC link, with SPIFFE identities (issue 19; docs/ARCHITECTURE.md,
 * "Inside the cluster: mTLS and per-RPC authorization").
 *
 * - A service's identity is the one URI SAN of its certificate, `spiffe://<trust domain>/<app>`
 *   (`RELAYPLANE_TRUST_DOMAIN`, default `relayplane.local`), whoever issued it: SPIRE,
 *   cert-manager's csi-driver-spiffe or a plain CA. Certificates carry no DNS name for the
 *   services, so a client checks the server's identity instead of its host name: a gateway
 *   dialling `issuer` accepts only `spiffe://<td>/issuer`, chained to the CA.
 * - Servers require a client certificate chained to the CA (the TLS handshake refuses any
 *   other); which peer may call which RPC is `rpc-authz.ts`, checked per call by `rpc.ts`.
 * - Rotation: grpc-js's FileWatcherCertificateProvider re-reads the three files every
 *   `RELAYPLANE_GRPC_TLS_REFRESH_MS`. Servers swap their secure context (new connections
 *   handshake with the new certificate, open ones carry on until their max connection age);
 *   clients build a context per new connection. `CheckedFiles` sits between the files and
 *   grpc-js so that a bad read never reaches a server or channel: grpc-js drops every new
 *   connection while its credentials are "invalid", so an unreadable file, a key that does not
 *   match its certificate (a rotation written non-atomically) or a certificate for another
 *   identity is logged and the previous, good files stay in use. So is a change that would break
 *   the chain (issue 31): a new leaf must chain to the CA bundle in force (or to the bundle read
 *   next, when both were written together), and a new bundle must hold the CA of the app's own
 *   leaf. Each refusal is counted (`relayplane_grpc_tls_reloads_refused_total{reason}`).
 * - Who a certificate names and the PEM checks themselves: spiffe.ts.
 * - Cost: one handshake per connection (ECDHE + the peer's chain), none per call; a server
 *   reads the peer certificate once per call for its identity.
 */
import { readFileSync } from 'node:fs';
import type { PeerCertificate } from 'node:tls';
import type { ServiceName } from '@relayplane/contract/contract';
import { grpc } from '@relayplane/proto/grpc';
import { ConfigError, type EnvReader } from './config.ts';
import type { Logger } from './logger.ts';
import { counter, type Registry } from './metrics.ts';
import {
  certificatesIn,
  checkCa,
  checkChain,
  checkIdentity,
  type PeerIdentity,
  peerIdentity,
  spiffeId,
  TRUST_DOMAIN,
  uriSanOf,
} from './spiffe.ts';

export { type PeerIdentity, peerIdentity, spiffeId, uriSanOf };

export const DEFAULT_TRUST_DOMAIN = 'relayplane.local';
/** How often the certificate, key and CA files are re-read by default (ms). */
export const DEFAULT_GRPC_TLS_REFRESH_MS = 2_000;

export const GRPC_TLS_VARIABLES = {
  cert: 'RELAYPLANE_GRPC_TLS_CERT_FILE',
  key: 'RELAYPLANE_GRPC_TLS_KEY_FILE',
  ca: 'RELAYPLANE_GRPC_TLS_CA_FILE',
} as const;

/** Mutual TLS on this service's gRPC links; absent from a config: plaintext. */
export interface GrpcTlsConfig {
  /** PEM certificate (leaf first, then any intermediates) whose URI SAN is this service's SPIFFE ID. */
  certFile: string;
  /** PEM private key of `certFile`. */
  keyFile: string;
  /** PEM bundle of the CA certificates a peer's chain must end at (old and new CA during a CA rotation). */
  caFile: string;
  /** `spiffe://<trustDomain>/<app>` names each service. */
  trustDomain: string;
  /** How often the three files are re-read (ms). */
  refreshMs: number;
  /** This service: its certificate must name it. */
  app: ServiceName;
}

// ------------------------------------------------------------------ configuration

/**
 * The mutual TLS settings of `app`: `RELAYPLANE_GRPC_TLS_CERT_FILE`, `_KEY_FILE` and
 * `_CA_FILE` (all three, or none: plaintext), `RELAYPLANE_TRUST_DOMAIN` and
 * `RELAYPLANE_GRPC_TLS_REFRESH_MS`. The files are read once here, so that a start with files
 * that cannot work (unreadable, a key that is not the certificate's, a certificate for
 * another identity, expired, not chained to the CA) stops with a message naming the variable
 * rather than failing every connection later.
 */
export function readGrpcTls(r: EnvReader, app: ServiceName): GrpcTlsConfig | undefined {
  const trustDomain = r.string('RELAYPLANE_TRUST_DOMAIN', DEFAULT_TRUST_DOMAIN);
  if (!TRUST_DOMAIN.test(trustDomain)) {
    throw new ConfigError(
      'RELAYPLANE_TRUST_DOMAIN',
      `must be a SPIFFE trust domain: lowercase letters, digits, ".", "-" and "_" (got "${trustDomain}")`,
    );
  }
  const refreshMs = r.int('RELAYPLANE_GRPC_TLS_REFRESH_MS', DEFAULT_GRPC_TLS_REFRESH_MS, {
    min: 100,
    max: 3_600_000,
  });
  const names = Object.values(GRPC_TLS_VARIABLES);
  const set = names.filter((name) => r.has(name));
  if (set.length === 0) return undefined;
  const missing = names.filter((name) => !r.has(name));
  if (missing[0] !== undefined) {
    throw new ConfigError(
      missing[0],
      `is not set, but ${set.join(' and ')} ${set.length === 1 ? 'is' : 'are'}: mutual TLS needs all of ${names.join(', ')} (or none of them for plaintext gRPC)`,
    );
  }
  const config: GrpcTlsConfig = {
    certFile: r.string(GRPC_TLS_VARIABLES.cert),
    keyFile: r.string(GRPC_TLS_VARIABLES.key),
    caFile: r.string(GRPC_TLS_VARIABLES.ca),
    trustDomain,
    refreshMs,
    app,
  };
  const files = {
    cert: readPem(GRPC_TLS_VARIABLES.cert, config.certFile),
    key: readPem(GRPC_TLS_VARIABLES.key, config.keyFile),
    ca: readPem(GRPC_TLS_VARIABLES.ca, config.caFile),
  };
  const caProblem = checkCa(files.ca);
  if (caProblem) throw new ConfigError(GRPC_TLS_VARIABLES.ca, `(${config.caFile}) ${caProblem}`);
  const identityProblem = checkIdentity(config, files.cert, files.key);
  if (identityProblem) {
    throw new ConfigError(
      identityProblem.startsWith('key') ? GRPC_TLS_VARIABLES.key : GRPC_TLS_VARIABLES.cert,
      `(${identityProblem.startsWith('key') ? config.keyFile : config.certFile}) ${identityProblem}`,
    );
  }
  const chainProblem = checkChain(files.cert, files.ca);
  if (chainProblem) throw new ConfigError(GRPC_TLS_VARIABLES.cert, `(${config.certFile}) ${chainProblem}`);
  return config;
}

function readPem(variable: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(
      variable,
      `names a file that cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}: ${path})`,
    );
  }
}

// ------------------------------------------------------------------ credentials

type CertificateProvider = grpc.experimental.CertificateProvider;
type CaUpdate = grpc.experimental.CaCertificateUpdate;
type IdentityUpdate = grpc.experimental.IdentityCertificateUpdate;
type CaListener = grpc.experimental.CaCertificateUpdateListener;
type IdentityListener = grpc.experimental.IdentityCertificateUpdateListener;

/**
 * Why a reload was refused (the `reason` label of `relayplane_grpc_tls_reloads_refused_total`):
 * `unreadable` a file could not be read, `invalid` a certificate, key or bundle that does not
 * check out on its own (wrong identity, expired, key not the certificate's, no CA), `untrusted`
 * a leaf that does not chain to the CA bundle, `drops_own_ca` a bundle without the CA of the
 * app's own leaf.
 */
export type ReloadRefusal = 'unreadable' | 'invalid' | 'untrusted' | 'drops_own_ca';

/**
 * The files as grpc-js sees them: what FileWatcherCertificateProvider reads, passed on only when
 * it changed and is usable; a read that fails or does not check out is logged (once per distinct
 * problem) and the last good files stay in force.
 */
class CheckedFiles implements CertificateProvider {
  readonly #config: GrpcTlsConfig;
  readonly #logger: Logger;
  readonly #files: grpc.experimental.FileWatcherCertificateProvider;
  readonly #caListeners = new Set<CaListener>();
  readonly #identityListeners = new Set<IdentityListener>();
  #ca: CaUpdate;
  #identity: IdentityUpdate;
  /** A checked certificate refused only because it does not chain to the CA bundle in force yet. */
  #pendingIdentity: IdentityUpdate | undefined;
  #problem: string | undefined;
  readonly #refusalListeners = new Set<(reason: ReloadRefusal) => void>();
  readonly #onCa = (update: CaUpdate | null) => this.#caRead(update);
  readonly #onIdentity = (update: IdentityUpdate | null) => this.#identityRead(update);

  constructor(config: GrpcTlsConfig, logger: Logger) {
    this.#config = config;
    this.#logger = logger;
    this.#files = new grpc.experimental.FileWatcherCertificateProvider({
      certificateFile: config.certFile,
      privateKeyFile: config.keyFile,
      caCertificateFile: config.caFile,
      refreshIntervalMs: config.refreshMs,
    });
    // Checked by readGrpcTls a moment ago: what the first connections use at once.
    this.#ca = { caCertificate: readFileSync(config.caFile) };
    this.#identity = { certificate: readFileSync(config.certFile), privateKey: readFileSync(config.keyFile) };
  }

  /** The files are watched while grpc-js listens (a server bound, a channel with connections). */
  #listening(change: () => void): void {
    const before = this.#caListeners.size + this.#identityListeners.size;
    change();
    const after = this.#caListeners.size + this.#identityListeners.size;
    if (before === 0 && after > 0) {
      this.#files.addIdentityCertificateListener(this.#onIdentity);
      this.#files.addCaCertificateListener(this.#onCa);
    } else if (before > 0 && after === 0) {
      this.#files.removeIdentityCertificateListener(this.#onIdentity);
      this.#files.removeCaCertificateListener(this.#onCa);
    }
  }

  addCaCertificateListener(listener: CaListener): void {
    this.#listening(() => this.#caListeners.add(listener));
    process.nextTick(listener, this.#ca);
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.#listening(() => this.#caListeners.delete(listener));
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.#listening(() => this.#identityListeners.add(listener));
    process.nextTick(listener, this.#identity);
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.#listening(() => this.#identityListeners.delete(listener));
  }

  /** Called once per refused reload (files polled again with the same problem are not counted again). */
  onRefused(listener: (reason: ReloadRefusal) => void): void {
    this.#refusalListeners.add(listener);
  }

  #refused(problem: string, reason: ReloadRefusal): void {
    if (this.#problem === problem) return;
    this.#problem = problem;
    for (const listener of this.#refusalListeners) listener(reason);
    this.#logger.error(
      { certFile: this.#config.certFile, keyFile: this.#config.keyFile, caFile: this.#config.caFile },
      `gRPC TLS files not reloaded: ${problem}; the previous certificate, key and CA stay in use`,
    );
  }

  #identityRead(update: IdentityUpdate | null): void {
    if (!update) {
      this.#refused('the certificate or key file cannot be read', 'unreadable');
      return;
    }
    if (
      update.certificate.equals(this.#identity.certificate) &&
      update.privateKey.equals(this.#identity.privateKey)
    ) {
      // The files hold the certificate in force again: nothing waits for a bundle any more.
      this.#pendingIdentity = undefined;
      return;
    }
    const problem = checkIdentity(this.#config, update.certificate, update.privateKey);
    if (problem) {
      this.#refused(problem, 'invalid');
      return;
    }
    // Issue 31: a new leaf must chain to the CA bundle in force, or peers would refuse it (or a
    // certificate from any CA dropped in the directory would be presented). Kept aside: the
    // bundle it chains to may be the one read with it. grpc-js hands over the CA of the same
    // read right after the identity, in the same tick: only a leaf still waiting after that is
    // refused, so a leaf written together with its new bundle is neither logged nor counted.
    const chain = checkChain(update.certificate, this.#ca.caCertificate);
    if (chain) {
      this.#pendingIdentity = update;
      process.nextTick(() => {
        if (this.#pendingIdentity === update) this.#refused(`the certificate file ${chain}`, 'untrusted');
      });
      return;
    }
    this.#useIdentity(update);
  }

  #useIdentity(update: IdentityUpdate): void {
    this.#problem = undefined;
    this.#pendingIdentity = undefined;
    this.#identity = update;
    const leaf = certificatesIn(update.certificate)[0];
    this.#logger.info(
      { identity: uriSanOf(leaf?.subjectAltName), notAfter: leaf?.validTo, serial: leaf?.serialNumber },
      'gRPC TLS certificate reloaded: new connections use it',
    );
    for (const listener of this.#identityListeners) listener(update);
  }

  #caRead(update: CaUpdate | null): void {
    if (!update) {
      this.#refused('the CA file cannot be read', 'unreadable');
      return;
    }
    if (update.caCertificate.equals(this.#ca.caCertificate)) return;
    const problem = checkCa(update.caCertificate);
    if (problem) {
      this.#refused(`the CA file ${problem}`, 'invalid');
      return;
    }
    // Our own certificate (or the one waiting for this bundle) must chain to the new bundle:
    // a bundle that drops our issuer would have every peer refuse us, and ours refuse them.
    const pending =
      this.#pendingIdentity && !checkChain(this.#pendingIdentity.certificate, update.caCertificate)
        ? this.#pendingIdentity
        : undefined;
    if (!pending && checkChain(this.#identity.certificate, update.caCertificate)) {
      this.#refused(
        `the CA file does not hold the CA that issued this ${this.#config.app}'s own certificate (rotate the certificate first, or trust both CAs)`,
        'drops_own_ca',
      );
      return;
    }
    this.#problem = undefined;
    this.#ca = update;
    this.#logger.info(
      { certificates: certificatesIn(update.caCertificate).length },
      'gRPC TLS CA bundle reloaded: new connections trust it',
    );
    for (const listener of this.#caListeners) listener(update);
    if (pending) this.#useIdentity(pending);
  }
}

/** What a client of one service connects with: credentials that expect that service's identity. */
export interface ClientTls {
  credentials: grpc.ChannelCredentials;
  /** Channel options: the TLS server name (the app's name; the certificates carry no DNS name). */
  options: grpc.ChannelOptions;
}

/**
 * One service's mutual TLS: the files watched once for its server and all its clients.
 * `client(app)` for each link, `serverCredentials()` for its server, `identityOf` per call.
 */
export class GrpcTls {
  readonly config: GrpcTlsConfig;
  readonly #files: CheckedFiles;
  readonly #clients = new Map<ServiceName, ClientTls>();
  #server: grpc.ServerCredentials | undefined;

  constructor(config: GrpcTlsConfig, logger: Logger) {
    this.config = config;
    this.#files = new CheckedFiles(config, logger);
  }

  /** Credentials for a channel to `server`: its chain must end at the CA and name `spiffe://<td>/<server>`. */
  client(server: ServiceName): ClientTls {
    let tls = this.#clients.get(server);
    if (!tls) {
      const expected = spiffeId(this.config.trustDomain, server);
      tls = {
        credentials: grpc.experimental.createCertificateProviderChannelCredentials(this.#files, this.#files, {
          checkServerIdentity: (_host, cert) => {
            const found = uriSanOf(cert.subjectaltname);
            return found === expected
              ? undefined
              : new Error(`server identity is ${found ?? 'missing'}, expected ${expected}`);
          },
        }),
        // SNI and the name checkServerIdentity is handed (ignored): an IP address would make Node warn.
        options: { 'grpc.ssl_target_name_override': server },
      };
      this.#clients.set(server, tls);
    }
    return tls;
  }

  /** Server credentials that require a client certificate chained to the CA. */
  serverCredentials(): grpc.ServerCredentials {
    // grpc-js's exported function takes (ca, identity) but builds (identity, ca): one provider serves both.
    this.#server ??= grpc.experimental.createCertificateProviderServerCredentials(
      this.#files,
      this.#files,
      true,
    );
    return this.#server;
  }

  /** `listener` hears of each refused reload of the files (logged at error, the old files kept). */
  onReloadRefused(listener: (reason: ReloadRefusal) => void): void {
    this.#files.onRefused(listener);
  }

  /** The identity of the peer that presented `certificate` (a call's `sslPeerCertificate`). */
  identityOf(certificate: PeerCertificate | undefined): PeerIdentity {
    return peerIdentity(certificate?.subjectaltname, this.config.trustDomain);
  }
}

/**
 * `relayplane_grpc_tls_reloads_refused_total{reason}` (docs/metrics.md): every refused reload of
 * the certificate files, by `ReloadRefusal`. RpcServer registers it for the apps that serve gRPC;
 * the gateway, a client only, registers it itself. Registered without TLS too (no series then),
 * so every app exports the same metric names whatever its links.
 */
export function countRefusedReloads(registry: Registry, tls: GrpcTls | undefined): void {
  const refused = counter(registry, {
    name: 'relayplane_grpc_tls_reloads_refused_total',
    help: 'gRPC TLS certificate, key or CA bundle reloads refused (the previous files stay in use), by reason.',
    labelNames: ['reason'],
  });
  tls?.onReloadRefused((reason) => refused.labels(reason).inc());
}

/** `new GrpcTls(config, logger)` when mutual TLS is configured; undefined (plaintext) otherwise. */
export function grpcTls(config: GrpcTlsConfig | undefined, logger: Logger): GrpcTls | undefined {
  return config ? new GrpcTls(config, logger) : undefined;
}

/**
 * The one warning a distributed-mode process logs at start when its gRPC links are plaintext
 * (each app's `main.ts`; embedded mode talks over loopback only and says nothing).
 */
export function warnIfPlaintext(logger: Logger, config: GrpcTlsConfig | undefined): void {
  if (config) return;
  logger.warn(
    `gRPC links are plaintext and unauthenticated: anyone who reaches this service's port can call it. Set ${Object.values(GRPC_TLS_VARIABLES).join(', ')} for mutual TLS (docs/ARCHITECTURE.md)`,
  );
}

/**
 * `<APP>_HEALTH_LISTEN_ADDRESS`: host:port of a plaintext listener serving grpc.health.v1 alone
 * (`RpcServerOptions.healthListen`), for probes that cannot present a client certificate once
 * mutual TLS is on. Unset: none.
 */
export function readHealthListen(r: EnvReader, name: string): string | undefined {
  return r.has(name) ? r.address(name) : undefined;
}
