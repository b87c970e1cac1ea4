/**
 * A certificate authority made in the test, with the openssl CLI (node:crypto cannot sign
 * certificates): EC P-256 keys, as SPIRE and cert-manager issue them by default, and leaf
 * certificates shaped like X509-SVIDs (one URI SAN, no DNS name, serverAuth + clientAuth).
 *
 * `MountedTls` writes the files the way the kubelet updates a mounted Secret (cert-manager's
 * renewals): every version in a directory of its own, `..data` a symlink to the current one
 * swapped by rename, the visible files symlinks through `..data`. A reader never sees a new
 * certificate beside an old key.
 */
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface KeyPair {
  /** PEM certificate (chain). */
  cert: string;
  /** PEM private key (PKCS#8). */
  key: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

let serial = 0;

export class TestCa {
  readonly name: string;
  /** PEM of the CA certificate: what a peer trusts. */
  readonly cert: string;
  readonly #dir: string;

  private constructor(name: string, dir: string, cert: string) {
    this.name = name;
    this.#dir = dir;
    this.cert = cert;
  }

  /** A new self-signed CA in a temporary directory. */
  static create(name = 'relayplane test ca'): TestCa {
    const dir = mkdtempSync(join(tmpdir(), 'rp-ca-'));
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        'ca.key',
        '-out',
        'ca.crt',
        '-days',
        '2',
        '-subj',
        `/CN=${name}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      dir,
    );
    return new TestCa(name, dir, readFileSync(join(dir, 'ca.crt'), 'utf8'));
  }

  /**
   * A leaf certificate for `uris` (URI SANs, e.g. `spiffe://relayplane.local/issuer`; none: a
   * certificate with no identity), valid for `days` (negative: already expired).
   */
  issue(uris: readonly string[], options: { days?: number; commonName?: string } = {}): KeyPair {
    const id = `leaf-${process.pid}-${++serial}`;
    const ext = [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth,clientAuth',
      ...(uris.length ? [`subjectAltName=${uris.map((u) => `URI:${u}`).join(',')}`] : []),
    ].join('\n');
    writeFileSync(join(this.#dir, `${id}.ext`), `${ext}\n`);
    openssl(
      [
        'req',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        `${id}.key`,
        '-out',
        `${id}.csr`,
        '-subj',
        `/CN=${options.commonName ?? id}`,
      ],
      this.#dir,
    );
    const days = options.days ?? 1;
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${id}.csr`,
        '-CA',
        'ca.crt',
        '-CAkey',
        'ca.key',
        '-set_serial',
        String(Date.now() * 1000 + serial),
        '-out',
        `${id}.crt`,
        '-extfile',
        `${id}.ext`,
        // A negative number gives a not-after before the not-before (now): expired.
        '-days',
        String(days),
      ],
      this.#dir,
    );
    return {
      cert: readFileSync(join(this.#dir, `${id}.crt`), 'utf8'),
      key: readFileSync(join(this.#dir, `${id}.key`), 'utf8'),
    };
  }

  /** Removes the CA's directory (its key included). */
  destroy(): void {
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/** The three files one process reads: `RELAYPLANE_GRPC_TLS_CERT_FILE`, `_KEY_FILE` and `_CA_FILE`. */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
}

/** One mounted Secret (`tls.crt`, `tls.key`, `ca.crt`), updated atomically as the kubelet does. */
export class MountedTls implements TlsFiles {
  readonly dir: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
  #version = 0;

  constructor(dir: string, contents: KeyPair & { ca: string }) {
    this.dir = dir;
    mkdirSync(dir, { recursive: true });
    this.certFile = join(dir, 'tls.crt');
    this.keyFile = join(dir, 'tls.key');
    this.caFile = join(dir, 'ca.crt');
    this.update(contents);
    for (const name of ['tls.crt', 'tls.key', 'ca.crt']) symlinkSync(join('..data', name), join(dir, name));
  }

  /** Writes a new version and switches `..data` to it in one rename. */
  update(contents: KeyPair & { ca: string }): void {
    const previous = this.#version > 0 ? `..v${this.#version}` : undefined;
    const version = `..v${++this.#version}`;
    const target = join(this.dir, version);
    mkdirSync(target);
    writeFileSync(join(target, 'tls.crt'), contents.cert);
    writeFileSync(join(target, 'tls.key'), contents.key, { mode: 0o600 });
    writeFileSync(join(target, 'ca.crt'), contents.ca);
    const link = join(this.dir, '..data_tmp');
    symlinkSync(version, link);
    renameSync(link, join(this.dir, '..data'));
    if (previous) rmSync(join(this.dir, previous), { recursive: true, force: true });
  }
}
