/**
 * Mutual TLS on every gRPC link (issue 19), the four apps as processes: two gateways, two
 * issuers, admin and billing, each with its own certificate from a CA made in the test
 * (`spiffe://relayplane.local/<app>`), files mounted the way the kubelet mounts a Secret.
 *
 * - every flow crosses every link: gateway → admin/issuer/billing (and their health checks),
 *   admin → billing, billing → issuer (usage), issuer and billing → admin (audit outboxes);
 * - a plaintext client, one without a certificate and one with another CA's are refused by the
 *   handshake; billing's valid certificate calling IssueCredentials gets PERMISSION_DENIED;
 * - leaf certificates, then the CA, rotated on disk under a steady issuance load through both
 *   gateways: not one request fails.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import type { AppError } from '@relayplane/contract/errors';
import { AdminService } from '@relayplane/proto/admin';
import { IssuerService } from '@relayplane/proto/issuer';
import type { GrpcTls } from '@relayplane/shared/grpc-tls';
import { connect } from '@relayplane/shared/rpc';
import { sampleValue, scrape } from '@relayplane/testing/metrics';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import type { KeyPair } from '@relayplane/testing/test-ca';
import { createVerifier } from '@relayplane/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findMetricsUrl } from '../soak/probes.ts';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { startProcess } from '../support/processes.ts';
import { SystemTls } from '../support/tls.ts';

const OWNER = { email: 'mtls@example.test', password: 'mutual tls password' };
const PLAINTEXT_WARNING = 'gRPC links are plaintext and unauthenticated';
const RELOADED = 'gRPC TLS certificate reloaded: new connections use it';
const CA_RELOADED = 'gRPC TLS CA bundle reloaded: new connections trust it';
/** Servers close each connection after this (GOAWAY), so rotations reach open links within it. */
const MAX_CONNECTION_AGE_MS = 2_000;

/** The error a gRPC call fails with: connect()'s AppError code, grpc-js's status and details. */
async function failure(call: Promise<unknown>): Promise<{ code: string; status: number; details: string }> {
  const err = (await call.then(
    () => {
      throw new Error('the call succeeded');
    },
    (e: unknown) => e,
  )) as AppError & { cause?: { code?: number; details?: string } };
  return { code: err.code, status: err.cause?.code ?? -1, details: err.cause?.details ?? '' };
}

/** What a bare TLS 1.3 client speaking HTTP/2 meets: `accepted`, the alert's code, or `closed`. */
function handshake(port: number, options: { ca: string } & Partial<KeyPair>): Promise<string> {
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host: '127.0.0.1',
      port,
      servername: 'issuer',
      ALPNProtocols: ['h2'],
      checkServerIdentity: () => undefined,
      ...options,
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    socket.once('close', () => resolve('closed'));
    socket.once('secureConnect', () => socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
    socket.once('data', () => {
      resolve('accepted');
      socket.destroy();
    });
  });
}

/** A google.protobuf.Timestamp (the tests package has no @bufbuild/protobuf of its own). */
const timestampOf = (d: Date) => ({
  seconds: BigInt(Math.floor(d.getTime() / 1000)),
  nanos: (d.getTime() % 1000) * 1e6,
});

/** Lines of a process's output whose message is `msg`. */
const logged = (output: string, msg: string) =>
  output.split('\n').filter((line) => line.includes(`"msg":"${msg}`)).length;

describe('mutual TLS on every gRPC link, with per-RPC authorization', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let tls: SystemTls;
  let system: Distributed;
  let gateways: Api[];
  let root: { authorization: string };
  let tenants = 0;
  const today = new Date().toISOString().slice(0, 10);

  beforeAll(async () => {
    database = await createTestDatabase('e2e_mtls');
    redis = createTestRedis('e2e_mtls');
    tls = SystemTls.create();
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    // The rotation load issues thousands of credentials with one key.
    writeFileSync(
      plans,
      'plans:\n  free:\n    limits: { max_concurrent_connections: 1000000, max_issuance_per_second_per_key: 1000000 }\n',
    );
    const age = String(MAX_CONNECTION_AGE_MS);
    system = await startDistributed({
      label: 'mtls',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 19).toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 2, gateway: 2 },
      tls,
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plans,
        ADMIN_SIGNUP_MAX_PER_IP: '10000',
        RELAYPLANE_GRPC_TLS_REFRESH_MS: '250',
        BILLING_USAGE_INTERVAL_MS: '1000',
        BILLING_BUILTIN_PAID_CHECKOUT: 'true',
      },
      appEnv: {
        issuer: { ISSUER_GRPC_MAX_CONNECTION_AGE_MS: age, ISSUER_METRICS_ADDRESS: '127.0.0.1:0' },
        admin: { ADMIN_GRPC_MAX_CONNECTION_AGE_MS: age },
        billing: { BILLING_GRPC_MAX_CONNECTION_AGE_MS: age },
      },
    });
    gateways = await Promise.all(system.baseUrls.map((u) => Api.connect(u)));
    const login = await gateways[0]?.request('POST', '/admin/v1/auth/login', { body: OWNER });
    root = { authorization: `Bearer ${login?.body.token}` };
  }, 180_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    tls?.destroy();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  /** The issuers' gRPC ports, from the address the gateways are given. */
  const issuerPorts = () =>
    (system.env.GATEWAY_ISSUER_ADDRESS ?? '')
      .replace('ipv4:', '')
      .split(',')
      .map((a) => Number(a.split(':')[1]));

  async function tenant() {
    const [a] = gateways as [Api];
    const n = ++tenants;
    const login = { email: `mtls${n}@example.test`, password: 'tenant password 123' };
    expect(
      (await a.request('POST', '/admin/v1/auth/signup', { body: { ...login, tenant_name: `M${n}` } })).status,
    ).toBe(201);
    const session = await a.request('POST', '/admin/v1/auth/login', { body: login });
    const auth = { authorization: `Bearer ${session.body.token}` };
    const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    expect(project.status).toBe(201);
    const key = await a.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    return { auth, key: key.body.key as string, projectId: project.body.id as string };
  }

  it('starts without the plaintext warning, and a process without the TLS files warns once', async () => {
    for (const p of system.procs) expect(p.output(), p.name).not.toContain(PLAINTEXT_WARNING);
    // A billing of its own (no database or Redis to reach: it listens and waits), without TLS files.
    const port = await freePort();
    const plain = startProcess('mtls-plaintext-billing', 'apps/billing/src/main.ts', {
      LOG_LEVEL: 'info',
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
      BILLING_LISTEN_ADDRESS: `127.0.0.1:${port}`,
    });
    try {
      await waitFor(
        async () => plain.output().includes('billing listening'),
        30_000,
        'the plaintext billing',
      );
      expect(plain.output().split(PLAINTEXT_WARNING).length - 1).toBe(1);
    } finally {
      expect(await plain.stop()).toBe(0);
    }
  }, 60_000);

  it('serves every flow over mTLS: sign-up, projects, keys, issuance on both gateways, JWKS, relays, assignment, revocation, usage, audit', async () => {
    const [a, b] = gateways as [Api, Api];
    const ready = await b.request('GET', '/readyz');
    expect(ready.body.services).toEqual({ admin: 'SERVING', issuer: 'SERVING', billing: 'SERVING' });
    const t = await tenant();

    const relay = await a.request('POST', '/admin/v1/relays', {
      headers: root,
      body: { region: 'eu-west', host: 'relay.mtls.example', port: 4433 },
    });
    expect(relay.status).toBe(201);
    const relayAuth = { authorization: `Bearer ${relay.body.token}` };
    expect(
      (await b.request('POST', '/v1/relays/heartbeat', { headers: relayAuth, body: { load: 0.1 } })).status,
    ).toBe(200);

    const issued = await Promise.all(
      [a, b, a, b].map((gw) =>
        gw.request('POST', '/api/v1/credentials', {
          headers: { 'x-api-key': t.key },
          body: { region: 'eu-west' },
        }),
      ),
    );
    expect(issued.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    const verifier = createVerifier({ baseUrl: b.baseUrl, relayToken: relay.body.token });
    try {
      await verifier.ready;
      const [first] = issued;
      const token = first?.body.token as string;
      await expect(verifier.verify(token, { scope: 'relay:session' })).resolves.toMatchObject({
        pid: t.projectId,
      });
      const jwks = await a.request('GET', '/v1/credentials/jwks');
      expect(jwks.body.keys.length).toBeGreaterThan(0);
      const assignment = await b.request('GET', '/v1/relays/assignment', {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(assignment.status).toBe(200);
      expect(
        (await a.request('POST', `/admin/v1/credentials/${first?.body.jti}/revoke`, { headers: t.auth }))
          .status,
      ).toBe(200);
      await waitFor(async () => verifier.isRevoked(first?.body.jti), 2_000, 'the revocation in the feed', 20);
      const introspection = await b.request('POST', '/v1/credentials/introspect', {
        headers: relayAuth,
        body: { token },
      });
      expect(introspection.body).toEqual({ active: false });
    } finally {
      await verifier.close();
    }

    // billing → issuer: the usage job summarises what the issuers counted.
    await waitFor(
      async () => {
        const usage = await a.request('GET', `/admin/v1/billing/usage?from=${today}&to=${today}`, {
          headers: t.auth,
        });
        return usage.body.days.some(
          (d: { project_id: string | null; credentials_issued: number }) =>
            d.project_id === null && d.credentials_issued >= 4,
        );
      },
      15_000,
      'usage aggregated from the issuers',
    );
    // Issuer → admin and billing → admin: their audit outboxes deliver; admin → billing: plan change.
    const session = await a.request('GET', '/admin/v1/auth/session', { headers: t.auth });
    const plan = await a.request('PUT', `/admin/v1/tenants/${session.body.tenant.id}/plan`, {
      headers: root,
      body: { plan: 'pro' },
    });
    expect(plan.status).toBe(200);
    for (const [auth, query] of [
      [t.auth, 'action=plan.change'],
      [t.auth, 'action=credential.revoke'],
      [root, 'action=relay.register&tenant_id=platform'],
    ] as const) {
      await waitFor(
        async () =>
          (await a.request('GET', `/admin/v1/audit-events?${query}`, { headers: auth })).body.events.length >
          0,
        5_000,
        `audit events ${query}`,
      );
    }
  }, 60_000);

  it('refuses at the TLS layer a plaintext client, a client without a certificate and one from another CA', async () => {
    const [port] = issuerPorts() as [number];
    const address = `127.0.0.1:${port}`;
    const options = { retries: false, timeoutMs: 3_000 };
    const plain = connect(IssuerService, address, options);
    const otherCa = tls.newCa();
    const foreign = tls.client('gateway', otherCa.issue(['spiffe://relayplane.local/gateway']));
    const foreignClient = connect(IssuerService, address, { ...options, tls: foreign.client('issuer') });
    try {
      for (const refused of [await failure(plain.getJwks({})), await failure(foreignClient.getJwks({}))]) {
        expect(refused.code).toBe('unavailable');
        expect(refused.status).toBe(14);
      }
      // The kind of refusal, seen by a bare TLS client: no certificate is the handshake's alert;
      // another CA's chain is dropped before any HTTP/2 byte; a valid gateway certificate is answered.
      expect(await handshake(port, { ca: tls.bundle })).toBe('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
      expect(
        await handshake(port, { ca: tls.bundle, ...otherCa.issue(['spiffe://relayplane.local/gateway']) }),
      ).toBe('closed');
      expect(await handshake(port, { ca: tls.bundle, ...tls.issue('gateway') })).toBe('accepted');
    } finally {
      plain.close();
      foreignClient.close();
    }
  });

  it("takes an audit event's source from the peer: billing's certificate claiming issuer, an action outside billing's, or a stale occurred_at is refused and recorded nowhere", async () => {
    const session = await gateways[0]?.request('GET', '/admin/v1/auth/session', { headers: root });
    const tenantId = session?.body.tenant.id as string;
    const chain = async () =>
      ((await gateways[0]?.request('GET', '/admin/v1/audit-events?limit=200', { headers: root }))?.body
        .events ?? []) as { id: string }[];
    const before = (await chain()).map((e) => e.id);
    const billing: GrpcTls = tls.client('billing');
    const admin = connect(AdminService, system.env.ISSUER_ADMIN_ADDRESS ?? '', {
      retries: false,
      timeoutMs: 3_000,
      tls: billing.client('admin'),
    });
    const event = (over: { action?: string; occurredAt?: Date } = {}) => ({
      id: randomUUID(),
      occurredAt: timestampOf(over.occurredAt ?? new Date()),
      tenantId,
      actor: { type: 'user', id: 'usr_forged' },
      action: over.action ?? 'plan.change',
      target: { type: 'tenant', id: tenantId },
      outcome: 'success',
      detailsJson: '{}',
    });
    try {
      const claimed = await failure(
        admin.recordAuditEvents({ source: 'issuer', events: [event({ action: 'credential.revoke' })] }),
      );
      expect(claimed).toMatchObject({
        code: 'invalid_request',
        details: 'the caller is billing, not issuer',
      });
      const outside = await failure(
        admin.recordAuditEvents({ source: 'billing', events: [event({ action: 'session.login' })] }),
      );
      expect(outside).toMatchObject({
        code: 'invalid_request',
        details: 'billing may not record session.login',
      });
      const prune = await failure(
        admin.recordAuditEvents({ source: '', events: [event({ action: 'audit.prune' })] }),
      );
      expect(prune.details).toBe('billing may not record audit.prune');
      const stale = await failure(
        admin.recordAuditEvents({
          source: 'billing',
          events: [event({ occurredAt: new Date(Date.now() - 3_600_000) })],
        }),
      );
      expect(stale.details).toMatch(/occurred_at must be within 300 seconds of now/);
      // What billing may record, it can, named billing whatever it sends.
      await expect(admin.recordAuditEvents({ source: '', events: [event()] })).resolves.toMatchObject({
        recorded: 1,
      });
    } finally {
      admin.close();
    }
    const added = (await chain()).filter((e) => !before.includes(e.id));
    expect(added).toHaveLength(1);
    const adminProc = system.procs.find((p) => p.name.includes('admin'));
    expect(adminProc?.output()).toContain('"msg":"audit delivery refused"');
  });

  it("answers PERMISSION_DENIED to billing's valid certificate calling IssueCredentials, and counts it", async () => {
    const [port] = issuerPorts() as [number];
    const proc = system.procs.find((p) => p.name === 'mtls-issuer-0');
    if (!proc?.child.pid) throw new Error('no issuer');
    const metricsUrl = await (async () => {
      let url: string | undefined;
      await waitFor(
        async () => {
          url = await findMetricsUrl(proc.child.pid ?? 0, new Set(issuerPorts()));
          return url !== undefined;
        },
        10_000,
        'the issuer metrics listener',
      );
      return url ?? '';
    })();
    const billing: GrpcTls = tls.client('billing');
    const issuer = connect(IssuerService, `127.0.0.1:${port}`, {
      retries: false,
      timeoutMs: 3_000,
      tls: billing.client('issuer'),
    });
    try {
      const stream = issuer.issueCredentials();
      stream.send({ requestId: 1n });
      stream.end();
      const denied = await failure(
        (async () => {
          for await (const _ of stream.responses) void _;
        })(),
      );
      expect(denied).toMatchObject({ code: 'forbidden', status: 7 });
      expect(denied.details).toBe('billing may not call relayplane.issuer.v1.IssuerService/IssueCredentials');
      // What billing may call, it can.
      await expect(issuer.summarizeUsage({ day: today })).resolves.toBeDefined();
      const count = sampleValue(await scrape(metricsUrl), 'relayplane_grpc_server_unauthorized_total', {
        method: 'relayplane.issuer.v1.IssuerService/IssueCredentials',
        peer: 'billing',
      });
      expect(count).toBe(1);
      expect(proc.output()).toContain('"peer":"spiffe://relayplane.local/billing"');
    } finally {
      issuer.close();
    }
  });

  it('rotates leaf certificates, then the CA, on disk under a steady issuance load through both gateways: 0 failed requests', async () => {
    const t = await tenant();
    const firstCa = tls.ca;
    const gatewayId = 'spiffe://relayplane.local/gateway';
    let ok = 0;
    const failed: string[] = [];
    let running = true;
    const load = Array.from({ length: 16 }, async (_, w) => {
      const url = `${system.baseUrls[w % 2]}/api/v1/credentials`;
      while (running) {
        try {
          const res = await fetch(url, {
            method: 'POST',
            headers: { 'x-api-key': t.key, 'content-type': 'application/json' },
            body: '{"ttl_seconds":60}',
          });
          const body = await res.text();
          if (res.status === 201) ok++;
          else failed.push(`${res.status} ${body}`);
        } catch (err) {
          failed.push(String(err));
        }
      }
    });
    /** Until every process has logged `msg` `times` times in all, then a max connection age twice over. */
    const everywhere = async (msg: string, times: number) => {
      await waitFor(
        async () => system.procs.every((p) => logged(p.output(), msg) >= times),
        15_000,
        `${msg} (${times}) in every process`,
      );
      await new Promise((resolve) => setTimeout(resolve, 2 * MAX_CONNECTION_AGE_MS));
    };
    const steps: string[] = [];
    const mark = (step: string) => steps.push(`${step}: ${ok} ok, ${failed.length} failed`);
    try {
      await waitFor(async () => ok > 100, 30_000, 'the load to flow');
      mark('before');
      tls.rotate();
      await everywhere(RELOADED, 1);
      mark('new leaves, same CA');
      const next = tls.newCa();
      tls.trust(`${tls.ca.cert}${next.cert}`);
      await everywhere(CA_RELOADED, 1);
      mark('old + new CA trusted');
      tls.rotate(next);
      await everywhere(RELOADED, 2);
      mark('leaves from the new CA');
      tls.trust(next.cert);
      await everywhere(CA_RELOADED, 2);
      mark('new CA alone');
    } finally {
      running = false;
      await Promise.all(load);
    }
    console.log(
      `certificate rotation under load: ${steps.join('; ')}; total ${ok} ok, ${failed.length} failed`,
    );
    expect(failed).toEqual([]);
    expect(ok).toBeGreaterThan(500);
    // The old CA is gone: its certificates are refused by every issuer now.
    for (const port of issuerPorts()) {
      expect(await handshake(port, { ca: tls.bundle, ...firstCa.issue([gatewayId]) })).toBe('closed');
      expect(await handshake(port, { ca: tls.bundle, ...tls.issue('gateway') })).toBe('accepted');
    }
  }, 180_000);

  it('checked every response against the OpenAPI document', () => {
    expect(gateways.reduce((n, g) => n + g.checked, 0)).toBeGreaterThan(20);
  });
});
