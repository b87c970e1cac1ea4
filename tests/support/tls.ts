/**
 * Mutual TLS for a distributed system under test: a CA made in the test and one mounted Secret
 * per app (`MountedTls`: `tls.crt`, `tls.key`, `ca.crt`, swapped atomically like the kubelet
 * does), each certificate naming `spiffe://relayplane.local/<app>`. `rotate` issues new leaves
 * (from the same CA or another) and `trust` replaces every app's CA bundle, as cert-manager
 * and an operator rotating the CA would.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServiceName } from '@relayplane/contract/contract';
import { DEFAULT_TRUST_DOMAIN, GrpcTls, spiffeId } from '@relayplane/shared/grpc-tls';
import { createLogger } from '@relayplane/shared/logger';
import { type KeyPair, MountedTls, TestCa } from '@relayplane/testing/test-ca';

export const APPS = ['gateway', 'issuer', 'admin', 'billing'] as const satisfies readonly ServiceName[];

export class SystemTls {
  ca: TestCa;
  /** The CA bundle every app trusts now. */
  bundle: string;
  readonly mounts: Record<ServiceName, MountedTls>;
  readonly #dir: string;
  readonly #cas: TestCa[] = [];
  /** Each app's current certificate and key. */
  readonly #pairs = new Map<ServiceName, KeyPair>();

  private constructor(dir: string, ca: TestCa) {
    this.#dir = dir;
    this.ca = ca;
    this.#cas.push(ca);
    this.bundle = ca.cert;
    this.mounts = Object.fromEntries(
      APPS.map((app) => {
        const pair = this.issue(app);
        this.#pairs.set(app, pair);
        return [app, new MountedTls(join(dir, app), { ...pair, ca: this.bundle })];
      }),
    ) as Record<ServiceName, MountedTls>;
  }

  static create(): SystemTls {
    return new SystemTls(mkdtempSync(join(tmpdir(), 'rp-system-tls-')), TestCa.create());
  }

  /** A leaf for `app` from the current CA (`uris` instead of its SPIFFE ID when given). */
  issue(app: ServiceName, uris: readonly string[] = [spiffeId(DEFAULT_TRUST_DOMAIN, app)]): KeyPair {
    return this.ca.issue(uris);
  }

  /** The variables of `app`'s processes. */
  env(app: ServiceName): Record<string, string> {
    const m = this.mounts[app];
    return {
      RELAYPLANE_GRPC_TLS_CERT_FILE: m.certFile,
      RELAYPLANE_GRPC_TLS_KEY_FILE: m.keyFile,
      RELAYPLANE_GRPC_TLS_CA_FILE: m.caFile,
    };
  }

  /**
   * A GrpcTls for a client in the test holding `pair` (default: a fresh certificate of `as`)
   * and trusting `ca` (default: the current bundle); files written under the system's directory.
   */
  client(as: ServiceName, pair: KeyPair = this.issue(as), ca = this.bundle): GrpcTls {
    const mount = new MountedTls(mkdtempSync(join(this.#dir, 'client-')), { ...pair, ca });
    return new GrpcTls(
      {
        certFile: mount.certFile,
        keyFile: mount.keyFile,
        caFile: mount.caFile,
        trustDomain: DEFAULT_TRUST_DOMAIN,
        refreshMs: 60_000,
        app: as,
      },
      createLogger({ level: 'silent', service: 'test-client' }),
    );
  }

  /** A new CA, not yet trusted by anyone: `trust` it, then `rotate`. */
  newCa(): TestCa {
    const ca = TestCa.create('next test ca');
    this.#cas.push(ca);
    return ca;
  }

  /** Every app trusts `bundle` (PEM, one CA or several) from now on. */
  trust(bundle: string): void {
    this.bundle = bundle;
    for (const app of APPS) this.#write(app, this.#current(app));
  }

  /** New leaves for every app, from `ca` (default: the current one), which becomes current. */
  rotate(ca: TestCa = this.ca): void {
    this.ca = ca;
    for (const app of APPS) this.#write(app, this.issue(app));
  }

  #current(app: ServiceName): KeyPair {
    const pair = this.#pairs.get(app);
    if (!pair) throw new Error(`no certificate for ${app}`);
    return pair;
  }

  #write(app: ServiceName, pair: KeyPair): void {
    this.#pairs.set(app, pair);
    this.mounts[app].update({ ...pair, ca: this.bundle });
  }

  destroy(): void {
    for (const ca of this.#cas) ca.destroy();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
