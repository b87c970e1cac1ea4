/**
 * Mutual TLS and per-RPC authorization over real gRPC (issue 19): a billing server with a test
 * CA's certificate, and clients holding certificates of each identity, of another CA, of none.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import type { ServiceName } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { BillingService } from '@relayplane/proto/billing';
import { grpc } from '@relayplane/proto/grpc';
import { IssuerService } from '@relayplane/proto/issuer';
import { ConfigError, EnvReader } from '@relayplane/shared/config';
import { GrpcTls, type GrpcTlsConfig, readGrpcTls, spiffeId } from '@relayplane/shared/grpc-tls';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { createLogger } from '@relayplane/shared/logger';
import { createRegistry, type Registry } from '@relayplane/shared/metrics';
import { connect, RpcServer, type ServiceClient, type ServiceImpl } from '@relayplane/shared/rpc';
import { sampleValue } from '@relayplane/testing/metrics';
import { type KeyPair, MountedTls, TestCa } from '@relayplane/testing/test-ca';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from './conformance/wait.ts';

const TD = 'relayplane.local';
const logLines: Record<string, unknown>[] = [];
const logger = createLogger(
  { level: 'info', service: 'grpc-tls-test' },
  { write: (line: string) => logLines.push(JSON.parse(line) as Record<string, unknown>) },
);

/** Billing whose ListPlans and GetEntitlements answer (or what `handlers` say); the rest is not exercised. */
function billingWith(
  handlers: Partial<ServiceImpl<typeof BillingService>> = {},
): ServiceImpl<typeof BillingService> {
  const target: Partial<ServiceImpl<typeof BillingService>> = {
    async listPlans() {
      return { plans: [{ id: 'free', name: 'Free' }] };
    },
    async getEntitlements() {
      return {};
    },
    ...handlers,
  };
  return new Proxy(target, {
    get: (t, prop) =>
      prop in t
        ? t[prop as keyof typeof t]
        : async () => {
            throw new AppError('not_found', 'not exercised');
          },
  }) as ServiceImpl<typeof BillingService>;
}
const billing = billingWith();

const dirs = () => mkdtempSync(join(tmpdir(), 'rp-mtls-'));

/** A config for `app` over files holding `pair` and trusting `ca` (checked like a start). */
function configFor(
  app: ServiceName,
  pair: KeyPair,
  ca: string,
  env: Record<string, string> = {},
): GrpcTlsConfig {
  const dir = dirs();
  writeFileSync(join(dir, 'tls.crt'), pair.cert);
  writeFileSync(join(dir, 'tls.key'), pair.key);
  writeFileSync(join(dir, 'ca.crt'), ca);
  const config = readGrpcTls(
    new EnvReader({
      RELAYPLANE_GRPC_TLS_CERT_FILE: join(dir, 'tls.crt'),
      RELAYPLANE_GRPC_TLS_KEY_FILE: join(dir, 'tls.key'),
      RELAYPLANE_GRPC_TLS_CA_FILE: join(dir, 'ca.crt'),
      ...env,
    }),
    app,
  );
  if (!config) throw new Error('no config');
  return config;
}

/** A GrpcTls over files that did not go through readGrpcTls's checks (a peer we do not run). */
function rawTls(app: ServiceName, pair: KeyPair, ca: string): GrpcTls {
  const dir = dirs();
  writeFileSync(join(dir, 'tls.crt'), pair.cert);
  writeFileSync(join(dir, 'tls.key'), pair.key);
  writeFileSync(join(dir, 'ca.crt'), ca);
  return new GrpcTls(
    {
      certFile: join(dir, 'tls.crt'),
      keyFile: join(dir, 'tls.key'),
      caFile: join(dir, 'ca.crt'),
      trustDomain: TD,
      refreshMs: 60_000,
      app,
    },
    logger,
  );
}

/** The error a call fails with (an AppError from connect(); its cause is grpc-js's ServiceError). */
async function failure(call: Promise<unknown>): Promise<{ code: string; grpcCode: number; details: string }> {
  const err = (await call.then(
    () => {
      throw new Error('the call succeeded');
    },
    (e: unknown) => e,
  )) as AppError & { cause?: { code?: number; details?: string } };
  return { code: err.code, grpcCode: err.cause?.code ?? -1, details: err.cause?.details ?? '' };
}

/**
 * What a bare TLS client (TLS 1.3, speaking HTTP/2) meets at `port`: `accepted` when the server
 * answers its preface, the TLS alert's error code when the handshake is refused with one, or
 * `closed` when the server drops the connection before answering.
 */
function handshake(port: number, options: { cert?: string; key?: string; ca: string }): Promise<string> {
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host: '127.0.0.1',
      port,
      servername: 'billing',
      ca: options.ca,
      cert: options.cert,
      key: options.key,
      ALPNProtocols: ['h2'],
      checkServerIdentity: () => undefined,
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    socket.once('close', () => resolve('closed'));
    socket.once('secureConnect', () => socket.write(HTTP2_PREFACE));
    socket.once('data', () => {
      resolve('accepted');
      socket.destroy();
    });
  });
}

/** What a plaintext HTTP/2 client gets from `port`: the bytes answered before the connection closed (1 s at most). */
function plaintext(port: number): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = netConnect(port, '127.0.0.1', () => socket.write(HTTP2_PREFACE));
    socket.setTimeout(1_000, () => socket.destroy());
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.once('error', () => {});
    socket.once('close', () => resolve(Buffer.concat(chunks)));
  });
}

const HTTP2_PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

describe('mutual TLS between services, with SPIFFE identities', () => {
  let ca: TestCa;
  let otherCa: TestCa;
  const pairs = {} as Record<ServiceName, KeyPair>;
  let server: RpcServer;
  let registry: Registry;
  const clients: { close(): void }[] = [];

  function client<S extends typeof BillingService | typeof HealthService | typeof IssuerService>(
    service: S,
    tls: GrpcTls | undefined,
    port = server.port,
  ): ServiceClient<S> {
    const c = connect(service, `127.0.0.1:${port}`, {
      timeoutMs: 3_000,
      retries: false,
      tls: tls?.client('billing'),
    });
    clients.push(c);
    return c;
  }

  beforeAll(() => {
    ca = TestCa.create();
    otherCa = TestCa.create('another ca');
    for (const app of ['gateway', 'issuer', 'admin', 'billing'] as const) {
      pairs[app] = ca.issue([spiffeId(TD, app)]);
    }
  });

  beforeEach(async () => {
    logLines.length = 0;
    registry = createRegistry();
    server = new RpcServer(logger, {
      tls: new GrpcTls(configFor('billing', pairs.billing, ca.cert), logger),
      metrics: registry,
      healthListen: '127.0.0.1:0',
    });
    server.add(BillingService, billing);
    await server.listen('127.0.0.1:0');
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await server.close(1_000);
  });

  afterAll(() => {
    ca?.destroy();
    otherCa?.destroy();
  });

  const tlsOf = (app: ServiceName) => new GrpcTls(configFor(app, pairs[app], ca.cert), logger);

  it('lets the gateway call what the matrix grants it, and admin GetEntitlements', async () => {
    expect((await client(BillingService, tlsOf('gateway')).listPlans({})).plans[0]?.id).toBe('free');
    await expect(
      client(BillingService, tlsOf('admin')).getEntitlements({ tenantId: 't' }),
    ).resolves.toBeDefined();
  });

  it('answers PERMISSION_DENIED to a valid certificate of a service the matrix does not list, logged with its identity and counted', async () => {
    const denied = await failure(client(BillingService, tlsOf('issuer')).listPlans({}));
    expect(denied.code).toBe('forbidden');
    expect(denied.grpcCode).toBe(7); // PERMISSION_DENIED
    expect(denied.details).toBe('issuer may not call relayplane.billing.v1.BillingService/ListPlans');
    const line = logLines.find((l) => l.msg === 'gRPC call refused: this peer may not call this method');
    expect(line).toMatchObject({
      level: 40,
      peer: spiffeId(TD, 'issuer'),
      method: 'relayplane.billing.v1.BillingService/ListPlans',
    });
    const text = await registry.metrics();
    expect(
      sampleValue(text, 'relayplane_grpc_server_unauthorized_total', {
        method: 'relayplane.billing.v1.BillingService/ListPlans',
        peer: 'issuer',
      }),
    ).toBe(1);
  });

  it('refuses a certificate of our CA without an identity, or of another trust domain, except for health checks', async () => {
    const anonymous = rawTls('gateway', ca.issue([]), ca.cert);
    expect((await failure(client(BillingService, anonymous).listPlans({}))).grpcCode).toBe(7);
    expect((await client(HealthService, anonymous).check({ service: '' })).status).toBe(
      ServingStatus.SERVING,
    );

    const foreign = rawTls('gateway', ca.issue(['spiffe://elsewhere.example/gateway']), ca.cert);
    const denied = await failure(client(BillingService, foreign).listPlans({}));
    expect(denied.details).toBe('this peer may not call relayplane.billing.v1.BillingService/ListPlans');
    const text = await registry.metrics();
    const count = (peer: string) =>
      sampleValue(text, 'relayplane_grpc_server_unauthorized_total', {
        method: 'relayplane.billing.v1.BillingService/ListPlans',
        peer,
      });
    expect([count('none'), count('other')]).toEqual([1, 1]);
  });

  it('refuses at the TLS layer a plaintext client, a client without a certificate and one from another CA (UNAVAILABLE)', async () => {
    const plain = await failure(client(BillingService, undefined).listPlans({}));
    const noCertificate = await failure(
      connect(BillingService, `127.0.0.1:${server.port}`, {
        retries: false,
        timeoutMs: 3_000,
        tls: {
          credentials: grpc.credentials.createSsl(Buffer.from(ca.cert), null, null, {
            checkServerIdentity: () => undefined,
          }),
          options: { 'grpc.ssl_target_name_override': 'billing' },
        },
      }).listPlans({}),
    );
    const otherCaClient = rawTls('gateway', otherCa.issue([spiffeId(TD, 'gateway')]), ca.cert);
    const foreignChain = await failure(client(BillingService, otherCaClient).listPlans({}));
    for (const refused of [plain, noCertificate, foreignChain]) {
      expect(refused.code).toBe('unavailable');
      expect(refused.grpcCode).toBe(14); // UNAVAILABLE: no connection, so never a call
    }
    // What the handshake says, seen by a bare TLS client.
    // What each refusal is, seen by bare TLS and TCP clients.
    expect(await handshake(server.port, { ca: ca.cert })).toBe('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
    // The server finds the chain unverifiable once the handshake is done and drops the connection unanswered.
    expect(await handshake(server.port, { ca: ca.cert, ...otherCa.issue([spiffeId(TD, 'gateway')]) })).toBe(
      'closed',
    );
    expect(await handshake(server.port, { ca: ca.cert, ...pairs.gateway })).toBe('accepted');
    // Plaintext: closed without a byte (a plaintext gRPC server answers the preface with its SETTINGS).
    expect((await plaintext(server.port)).length).toBe(0);
    expect((await plaintext(server.healthPort ?? 0)).length).toBeGreaterThan(0);
    expect(noCertificate.details).toContain('alert certificate required');
    // No call reached the service: none was handled, none refused by the matrix.
    const text = await registry.metrics();
    expect(text).not.toContain('relayplane_grpc_server_handled_total{');
    expect(text).not.toContain('relayplane_grpc_server_unauthorized_total{');
  });

  it('refuses a server whose certificate names another service than the one dialled', async () => {
    // The billing server, dialled as if it were the issuer.
    const tls = tlsOf('gateway');
    const issuer = connect(IssuerService, `127.0.0.1:${server.port}`, {
      retries: false,
      timeoutMs: 3_000,
      tls: tls.client('issuer'),
    });
    clients.push(issuer);
    const refused = await failure(issuer.getJwks({}));
    expect(refused.grpcCode).toBe(14);
    expect(refused.details).toContain(
      `server identity is ${spiffeId(TD, 'billing')}, expected ${spiffeId(TD, 'issuer')}`,
    );
  });

  it('serves health alone, in plaintext, on the health listener (for probes without a certificate)', async () => {
    const port = server.healthPort ?? 0;
    expect(port).toBeGreaterThan(0);
    expect((await client(HealthService, undefined, port).check({ service: '' })).status).toBe(
      ServingStatus.SERVING,
    );
    expect((await failure(client(BillingService, undefined, port).listPlans({}))).grpcCode).toBe(12); // UNIMPLEMENTED
  });

  it('refuses to register a service with a method the matrix does not declare', () => {
    const undeclared = {
      ...BillingService,
      methods: [{ ...BillingService.methods[0], name: 'MintMoney', parent: BillingService }],
    } as unknown as typeof BillingService;
    expect(() => server.add(undeclared, billing)).toThrow(
      'relayplane.billing.v1.BillingService/MintMoney: not in the RPC authorization matrix',
    );
  });
});

describe('certificate rotation without restarts', () => {
  let ca: TestCa;
  let nextCa: TestCa;

  beforeAll(() => {
    ca = TestCa.create();
    nextCa = TestCa.create('next ca');
  });

  afterAll(() => {
    ca?.destroy();
    nextCa?.destroy();
  });

  /** The serial number of the certificate the server at `port` presents to a new connection. */
  function presented(port: number, client: KeyPair, trust: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = tlsConnect({
        host: '127.0.0.1',
        port,
        servername: 'billing',
        ca: trust,
        ...client,
        ALPNProtocols: ['h2'],
        checkServerIdentity: () => undefined,
      });
      socket.once('secureConnect', () => {
        resolve(socket.getPeerCertificate().serialNumber);
        socket.destroy();
      });
      socket.once('error', reject);
    });
  }

  const serialOf = (pair: KeyPair) => new X509Certificate(pair.cert).serialNumber;

  it('swaps leaf certificates, then the CA (old+new bundle, new leaves, new CA alone) under steady calls: 0 failed', async () => {
    const root = mkdtempSync(join(tmpdir(), 'rp-rotate-'));
    let serverPair = ca.issue([spiffeId(TD, 'billing')]);
    let clientPair = ca.issue([spiffeId(TD, 'gateway')]);
    const serverFiles = new MountedTls(join(root, 'billing'), { ...serverPair, ca: ca.cert });
    const clientFiles = new MountedTls(join(root, 'gateway'), { ...clientPair, ca: ca.cert });
    const env = (files: MountedTls) => ({
      RELAYPLANE_GRPC_TLS_CERT_FILE: files.certFile,
      RELAYPLANE_GRPC_TLS_KEY_FILE: files.keyFile,
      RELAYPLANE_GRPC_TLS_CA_FILE: files.caFile,
      RELAYPLANE_GRPC_TLS_REFRESH_MS: '200',
    });
    const serverTls = readGrpcTls(new EnvReader(env(serverFiles)), 'billing');
    const clientTls = readGrpcTls(new EnvReader(env(clientFiles)), 'gateway');
    if (!serverTls || !clientTls) throw new Error('no config');
    // Client certificates the server saw, by serial number.
    const seen = new Set<string>();
    const server = new RpcServer(logger, {
      tls: new GrpcTls(serverTls, logger),
      // Connections are replaced every ~0.5 s, as max connection age does in production (2 min).
      maxConnectionAgeMs: 500,
      maxConnectionAgeGraceMs: 5_000,
    });
    server.add(
      BillingService,
      billingWith({
        async listPlans(_req, call) {
          const serial = call.peerCertificate?.()?.serialNumber;
          if (serial) seen.add(serial);
          return { plans: [{ id: 'free', name: 'Free' }] };
        },
      }),
    );
    await server.listen('127.0.0.1:0');
    const client = connect(BillingService, `127.0.0.1:${server.port}`, {
      tls: new GrpcTls(clientTls, logger).client('billing'),
    });
    let ok = 0;
    const failed: string[] = [];
    let running = true;
    const load = Array.from({ length: 8 }, async () => {
      while (running) {
        await client.listPlans({}).then(
          () => ok++,
          (err: Error) => failed.push(err.message),
        );
      }
    });
    const both = (contents: { server: KeyPair; client: KeyPair; ca: string }) => {
      serverPair = contents.server;
      clientPair = contents.client;
      serverFiles.update({ ...contents.server, ca: contents.ca });
      clientFiles.update({ ...contents.client, ca: contents.ca });
    };
    /** Until the server presents its new certificate and has seen the client's on a call. */
    const applied = async (trust: string) => {
      const want = { server: serialOf(serverPair), client: serialOf(clientPair) };
      await waitFor('the rotated certificates in use on both sides', () => seen.has(want.client), 20_000);
      expect(await presented(server.port, clientPair, trust)).toBe(want.server);
    };
    // The waits below are for events (a reload, a certificate seen, calls made), with deadlines
    // far beyond what they take: a loaded machine makes a few dozen calls a second here.
    try {
      await waitFor('calls to flow', () => ok > 50, 20_000);
      // 1. New leaves from the same CA.
      both({
        server: ca.issue([spiffeId(TD, 'billing')]),
        client: ca.issue([spiffeId(TD, 'gateway')]),
        ca: ca.cert,
      });
      await applied(ca.cert);
      // 2. The CA bundle holds the old and the new CA.
      const bundle = `${ca.cert}${nextCa.cert}`;
      const reloads = () =>
        logLines.filter((l) => l.msg === 'gRPC TLS CA bundle reloaded: new connections trust it').length;
      const before2 = reloads();
      both({ server: serverPair, client: clientPair, ca: bundle });
      // An operator waits for every service to trust both CAs before issuing from the new one.
      await waitFor('both sides to trust the new CA', () => reloads() === before2 + 2, 20_000);
      // 3. Leaves from the new CA (each side still trusts the old one the other may present).
      both({
        server: nextCa.issue([spiffeId(TD, 'billing')]),
        client: nextCa.issue([spiffeId(TD, 'gateway')]),
        ca: bundle,
      });
      await applied(bundle);
      // 4. The old CA dropped.
      const before4 = reloads();
      both({ server: serverPair, client: clientPair, ca: nextCa.cert });
      await waitFor('both sides to trust the new CA alone', () => reloads() === before4 + 2, 20_000);
      const before = ok;
      await waitFor('more calls under the new CA alone', () => ok > before + 200, 30_000);
      expect(await presented(server.port, clientPair, nextCa.cert)).toBe(serialOf(serverPair));
      // A certificate of the old CA is refused from now on.
      const oldCa = ca.issue([spiffeId(TD, 'gateway')]);
      const deadline = Date.now() + 5_000;
      while ((await handshake(server.port, { ca: nextCa.cert, ...oldCa })) !== 'closed') {
        if (Date.now() > deadline) throw new Error('the server still accepts the old CA');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(await handshake(server.port, { ca: nextCa.cert, ...clientPair })).toBe('accepted');
    } finally {
      running = false;
      await Promise.all(load);
      client.close();
      await server.close(1_000);
    }
    console.log(`rotation under load: ${ok} calls, ${failed.length} failed`);
    expect(failed).toEqual([]);
  }, 120_000);

  it('refuses a new leaf that does not chain to the CA bundle, and a bundle without the CA of its own leaf, counting each (issue 31)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'rp-rotate-chain-'));
    const good = ca.issue([spiffeId(TD, 'billing')]);
    const files = new MountedTls(join(root, 'billing'), { ...good, ca: ca.cert });
    const config = readGrpcTls(
      new EnvReader({
        RELAYPLANE_GRPC_TLS_CERT_FILE: files.certFile,
        RELAYPLANE_GRPC_TLS_KEY_FILE: files.keyFile,
        RELAYPLANE_GRPC_TLS_CA_FILE: files.caFile,
        RELAYPLANE_GRPC_TLS_REFRESH_MS: '100',
      }),
      'billing',
    );
    if (!config) throw new Error('no config');
    logLines.length = 0;
    const registry = createRegistry();
    const server = new RpcServer(logger, { tls: new GrpcTls(config, logger), metrics: registry });
    server.add(BillingService, billing);
    await server.listen('127.0.0.1:0');
    const gateway = ca.issue([spiffeId(TD, 'gateway')]);
    const refusals = () => logLines.filter((l) => String(l.msg).startsWith('gRPC TLS files not reloaded'));
    const refusedReloads = async (reason: string) =>
      sampleValue(await registry.metrics(), 'relayplane_grpc_tls_reloads_refused_total', { reason });
    try {
      // A leaf from a CA the bundle does not hold: refused, the old one still presented.
      files.update({ ...nextCa.issue([spiffeId(TD, 'billing')]), ca: ca.cert });
      await waitFor('the refusal of the foreign leaf', () =>
        refusals().some((l) => String(l.msg).includes('does not chain to a CA')),
      );
      expect(await presented(server.port, gateway, ca.cert)).toBe(serialOf(good));
      expect(await refusedReloads('untrusted')).toBe(1);
      // Back to the good leaf, then a bundle of the next CA alone: it does not hold our issuer.
      files.update({ ...good, ca: ca.cert });
      logLines.length = 0;
      files.update({ ...good, ca: nextCa.cert });
      await waitFor('the refusal of the bundle', () =>
        refusals().some((l) =>
          String(l.msg).includes("does not hold the CA that issued this billing's own certificate"),
        ),
      );
      expect(logLines.some((l) => l.msg === 'gRPC TLS CA bundle reloaded: new connections trust it')).toBe(
        false,
      );
      // The old bundle is still the one in force: a gateway of the old CA still gets in.
      expect(await presented(server.port, gateway, ca.cert)).toBe(serialOf(good));
      expect(await refusedReloads('drops_own_ca')).toBe(1);
      // Leaf and bundle of the next CA written together: taken together, nothing refused.
      logLines.length = 0;
      const moved = nextCa.issue([spiffeId(TD, 'billing')]);
      files.update({ ...moved, ca: nextCa.cert });
      await waitFor('the move to the next CA', () =>
        logLines.some((l) => l.msg === 'gRPC TLS certificate reloaded: new connections use it'),
      );
      expect(await presented(server.port, nextCa.issue([spiffeId(TD, 'gateway')]), nextCa.cert)).toBe(
        serialOf(moved),
      );
      expect(refusals()).toEqual([]);
      expect(await refusedReloads('untrusted')).toBe(1);
      expect(await refusedReloads('drops_own_ca')).toBe(1);
    } finally {
      await server.close(1_000);
    }
  });

  it('keeps the last good files when a rotation leaves a key that is not the certificate’s, and says so', async () => {
    const root = mkdtempSync(join(tmpdir(), 'rp-rotate-'));
    const good = ca.issue([spiffeId(TD, 'billing')]);
    const files = new MountedTls(join(root, 'billing'), { ...good, ca: ca.cert });
    const config = readGrpcTls(
      new EnvReader({
        RELAYPLANE_GRPC_TLS_CERT_FILE: files.certFile,
        RELAYPLANE_GRPC_TLS_KEY_FILE: files.keyFile,
        RELAYPLANE_GRPC_TLS_CA_FILE: files.caFile,
        RELAYPLANE_GRPC_TLS_REFRESH_MS: '100',
      }),
      'billing',
    );
    if (!config) throw new Error('no config');
    logLines.length = 0;
    const server = new RpcServer(logger, { tls: new GrpcTls(config, logger) });
    server.add(BillingService, billing);
    await server.listen('127.0.0.1:0');
    const gateway = ca.issue([spiffeId(TD, 'gateway')]);
    try {
      const next = ca.issue([spiffeId(TD, 'billing')]);
      files.update({ cert: next.cert, key: ca.issue([spiffeId(TD, 'billing')]).key, ca: ca.cert });
      await waitFor('the refusal to be logged', () =>
        logLines.some((l) =>
          String(l.msg).startsWith('gRPC TLS files not reloaded: key is not the private key'),
        ),
      );
      expect(logLines.filter((l) => String(l.msg).startsWith('gRPC TLS files not reloaded'))).toHaveLength(1);
      // Still the good certificate, and new connections still succeed.
      expect(await presented(server.port, gateway, ca.cert)).toBe(serialOf(good));
      files.update({ ...next, ca: ca.cert });
      await waitFor('the reload to be logged', () =>
        logLines.some((l) => l.msg === 'gRPC TLS certificate reloaded: new connections use it'),
      );
      expect(await presented(server.port, gateway, ca.cert)).toBe(serialOf(next));
    } finally {
      await server.close(1_000);
    }
  });
});

describe('readGrpcTls: files that cannot work stop the start, naming the variable', () => {
  let ca: TestCa;
  let otherCa: TestCa;

  beforeAll(() => {
    ca = TestCa.create();
    otherCa = TestCa.create('another ca');
  });

  afterAll(() => {
    ca?.destroy();
    otherCa?.destroy();
  });

  function problem(pair: KeyPair, trust: string, app: ServiceName = 'issuer'): ConfigError {
    try {
      configFor(app, pair, trust);
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('no configuration error');
  }

  it('accepts a certificate naming this service, chained to the CA, with the defaults', () => {
    const config = configFor('issuer', ca.issue([spiffeId(TD, 'issuer')]), ca.cert);
    expect(config).toMatchObject({ trustDomain: 'relayplane.local', refreshMs: 2_000, app: 'issuer' });
    const elsewhere = configFor('issuer', ca.issue(['spiffe://prod.example/issuer']), ca.cert, {
      RELAYPLANE_TRUST_DOMAIN: 'prod.example',
      RELAYPLANE_GRPC_TLS_REFRESH_MS: '5000',
    });
    expect(elsewhere).toMatchObject({ trustDomain: 'prod.example', refreshMs: 5_000 });
  });

  it('refuses a key that is not the certificate’s', () => {
    const pair = {
      cert: ca.issue([spiffeId(TD, 'issuer')]).cert,
      key: ca.issue([spiffeId(TD, 'issuer')]).key,
    };
    const err = problem(pair, ca.cert);
    expect(err.variable).toBe('RELAYPLANE_GRPC_TLS_KEY_FILE');
    expect(err.message).toContain('key is not the private key of the certificate');
  });

  it('refuses a certificate for another service, without a SPIFFE ID, expired, or from another CA', () => {
    const other = problem(ca.issue([spiffeId(TD, 'billing')]), ca.cert);
    expect(other.variable).toBe('RELAYPLANE_GRPC_TLS_CERT_FILE');
    expect(other.message).toContain(
      `holds a certificate for spiffe://relayplane.local/billing; this issuer must present spiffe://relayplane.local/issuer`,
    );
    expect(problem(ca.issue([]), ca.cert).message).toContain('holds a certificate for no single URI SAN');
    expect(problem(ca.issue([spiffeId(TD, 'issuer')], { days: -1 }), ca.cert).message).toMatch(/expired at/);
    const foreign = problem(otherCa.issue([spiffeId(TD, 'issuer')]), ca.cert);
    expect(foreign.variable).toBe('RELAYPLANE_GRPC_TLS_CERT_FILE');
    expect(foreign.message).toContain('does not chain to a CA of RELAYPLANE_GRPC_TLS_CA_FILE');
  });

  it('refuses a CA file without a CA certificate, and a file that cannot be read', () => {
    const leaf = ca.issue([spiffeId(TD, 'issuer')]);
    const notCa = problem(leaf, leaf.cert);
    expect(notCa.variable).toBe('RELAYPLANE_GRPC_TLS_CA_FILE');
    expect(notCa.message).toContain('holds no CA certificate');
    expect(problem(leaf, 'not a pem').message).toContain('holds no PEM certificate');
    const missing = (() => {
      try {
        readGrpcTls(
          new EnvReader({
            RELAYPLANE_GRPC_TLS_CERT_FILE: '/nonexistent/tls.crt',
            RELAYPLANE_GRPC_TLS_KEY_FILE: '/nonexistent/tls.key',
            RELAYPLANE_GRPC_TLS_CA_FILE: '/nonexistent/ca.crt',
          }),
          'issuer',
        );
      } catch (err) {
        return err as ConfigError;
      }
      throw new Error('no configuration error');
    })();
    expect(missing.variable).toBe('RELAYPLANE_GRPC_TLS_CERT_FILE');
    expect(missing.message).toContain('names a file that cannot be read (ENOENT: /nonexistent/tls.crt)');
  });
});
