/**
 * Start before the dependencies (issue 16 item 3): each app is started as a process while what
 * it needs is unreachable (a TCP proxy that refuses, or that answers nothing), stays alive and
 * not ready, and is ready within 5 s of the dependency's return — the same process, never
 * restarted. Only invalid configuration exits (78), and SIGTERM ends the wait at once.
 *
 * Readiness is read the way Kubernetes and the gateway read it: gRPC health of the service's
 * full name (the whole server, '', is liveness), the gateway's /readyz and /healthz. Each poll
 * opens a fresh channel, so what is measured is the app, not the test client's reconnect backoff.
 */

import { DEFAULT_KEY_MODE } from '@relayplane/contract/contract';
import { newId } from '@relayplane/contract/ids';
import { AdminService } from '@relayplane/proto/admin';
import { BillingService } from '@relayplane/proto/billing';
import { IssuerService } from '@relayplane/proto/issuer';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { connect } from '@relayplane/shared/rpc';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, startProcess, systemEnv } from '../support/processes.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';

const OWNER = { email: 'first@example.test', password: 'start before dependencies' };
/** What the issue asks: ready within 5 s of the dependency's return. */
const READY_WITHIN_MS = 5_000;
/** How long an app is watched while its dependency is away. */
const WAIT_WINDOW_MS = 3_000;
/** The issuer's issuance status (apps/issuer/src/service.ts, docs/ARCHITECTURE.md). */
const ISSUANCE = `${IssuerService.typeName}/issuance`;

type Status = keyof typeof ServingStatus | 'UNREACHABLE';

/** The health status of `service` on 127.0.0.1:`port`, over a fresh channel. */
async function health(port: number, service: string): Promise<Status> {
  const client = connect(HealthService, `127.0.0.1:${port}`, { timeoutMs: 1_000 });
  try {
    return ServingStatus[(await client.check({ service })).status] as Status;
  } catch {
    return 'UNREACHABLE';
  } finally {
    client.close();
  }
}

async function readyz(baseUrl: string): Promise<number> {
  return (await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(2_000) })).status;
}

/**
 * Watches `proc` for WAIT_WINDOW_MS (an absence of exits can only be seen over a window): it
 * stays alive and `probe` keeps answering `expected`.
 */
async function staysUp<T>(proc: Proc, probe: () => Promise<T>, expected: T): Promise<void> {
  const until = Date.now() + WAIT_WINDOW_MS;
  while (Date.now() < until) {
    expect(proc.child.exitCode, proc.output()).toBeNull();
    expect(await probe()).toBe(expected);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function report(what: string, ms: number): void {
  console.info(`[start-before-deps] ${what}: ${ms} ms`);
}

describe('start before the dependencies: alive and not ready while they are away, ready within 5 s of their return', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  const procs: Proc[] = [];
  const proxies: TcpProxy[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('e2e_startdeps');
    redis = createTestRedis('e2e_startdeps');
  }, 60_000);

  afterEach(async () => {
    // By PID (Proc.stop: SIGTERM, SIGKILL after 20 s), whatever the test left running.
    await Promise.all(procs.splice(0).map((p) => p.stop()));
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });

  afterAll(async () => {
    await redis?.clean();
    await database?.drop();
  });

  async function proxyTo(url: string, fallbackPort: number): Promise<TcpProxy> {
    const target = new URL(url);
    const proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || fallbackPort) });
    proxies.push(proxy);
    return proxy;
  }

  const postgresProxy = () => proxyTo(database.url, 5432);
  const redisProxy = () => proxyTo(redis.url, 6379);

  function viaProxy(url: string, proxy: TcpProxy): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(proxy.port);
    return u.toString();
  }

  async function env(o: { databaseUrl?: string; redisUrl?: string } = {}) {
    return systemEnv(
      {
        databaseUrl: o.databaseUrl ?? database.url,
        redisUrl: o.redisUrl ?? redis.url,
        redisPrefix: redis.prefix,
        kek: Buffer.alloc(32, 16).toString('base64'),
        bootstrap: OWNER,
      },
      { billing: await freePort(), admin: await freePort() },
    );
  }

  function start(name: string, app: string, vars: Record<string, string>): Proc {
    const proc = startProcess(`startdeps-${name}`, `apps/${app}/src/main.ts`, vars);
    procs.push(proc);
    return proc;
  }

  /** Until the gRPC server answers: it listens before its dependencies, so this is the boot time. */
  async function listening(proc: Proc, port: number): Promise<void> {
    await waitFor(
      async () => {
        if (proc.child.exitCode !== null) throw new Error(`${proc.name} exited:\n${proc.output()}`);
        return (await health(port, '')) === 'SERVING';
      },
      30_000,
      `${proc.name} to listen`,
    );
  }

  it('issuer started while PostgreSQL refuses connections', async () => {
    const pg = await postgresProxy();
    await pg.refuse();
    const port = await freePort();
    const issuer = start('issuer-pg', 'issuer', {
      ...(await env({ databaseUrl: viaProxy(database.url, pg) })),
      ISSUER_LISTEN_ADDRESS: `127.0.0.1:${port}`,
    });
    await listening(issuer, port);
    const pid = issuer.child.pid;
    await staysUp(issuer, () => health(port, IssuerService.typeName), 'NOT_SERVING');
    // Logged once for the whole wait, not once per attempt.
    expect(issuer.output().split('migrations: waiting for a dependency').length - 1).toBe(1);

    await pg.restore();
    const ms = await waitFor(
      async () => (await health(port, IssuerService.typeName)) === 'SERVING',
      READY_WITHIN_MS,
      'the issuer to be ready after PostgreSQL returned',
    );
    report('issuer ready after PostgreSQL returned', ms);
    expect(issuer.child.pid).toBe(pid);
    expect(issuer.child.exitCode).toBeNull();
    const client = connect(IssuerService, `127.0.0.1:${port}`);
    try {
      expect((await client.getJwks({})).keys.length).toBeGreaterThan(0);
    } finally {
      client.close();
    }
  });

  it('issuer started while Redis refuses connections: serves the JWKS at once, issues within 5 s of Redis returning', async () => {
    const proxy = await redisProxy();
    await proxy.refuse();
    const port = await freePort();
    const issuer = start('issuer-redis', 'issuer', {
      ...(await env({ redisUrl: viaProxy(redis.url, proxy) })),
      ISSUER_LISTEN_ADDRESS: `127.0.0.1:${port}`,
    });
    await listening(issuer, port);
    const pid = issuer.child.pid;
    // What needs no Redis is ready: the service (JWKS, revocation feed, relays) ...
    await waitFor(
      async () => (await health(port, IssuerService.typeName)) === 'SERVING',
      30_000,
      'the issuer to be ready without Redis',
    );
    const client = connect(IssuerService, `127.0.0.1:${port}`, { retries: false });
    const request = {
      tenantId: newId('tenant'),
      projectId: newId('project'),
      apiKeyId: newId('apiKey'),
      mode: DEFAULT_KEY_MODE,
      maxConcurrentConnections: 5,
    };
    try {
      expect((await client.getJwks({})).keys.length).toBeGreaterThan(0);
      // ... issuance, which reserves slots in Redis, is not: 503 + Retry-After at the gateway.
      await staysUp(issuer, () => health(port, ISSUANCE), 'NOT_SERVING');
      await expect(client.issueCredential(request)).rejects.toMatchObject({ code: 'unavailable' });

      await proxy.restore();
      const ms = await waitFor(
        async () => (await health(port, ISSUANCE)) === 'SERVING',
        READY_WITHIN_MS,
        'issuance to be ready after Redis returned',
      );
      report('issuer issuing after Redis returned', ms);
      expect((await client.issueCredential(request)).token).not.toBe('');
    } finally {
      client.close();
    }
    expect(issuer.child.pid).toBe(pid);
    expect(issuer.child.exitCode).toBeNull();
  });

  it('admin started while PostgreSQL answers nothing (connections accepted, never served)', async () => {
    const pg = await postgresProxy();
    pg.blackhole();
    const port = await freePort();
    const admin = start('admin-pg', 'admin', {
      ...(await env({ databaseUrl: viaProxy(database.url, pg) })),
      ADMIN_LISTEN_ADDRESS: `127.0.0.1:${port}`,
      // No first owner: that would also wait for billing, which this test does not run.
      RELAYPLANE_BOOTSTRAP_EMAIL: '',
      RELAYPLANE_BOOTSTRAP_PASSWORD: '',
    });
    await listening(admin, port);
    const pid = admin.child.pid;
    await staysUp(admin, () => health(port, AdminService.typeName), 'NOT_SERVING');
    const client = connect(AdminService, `127.0.0.1:${port}`, { retries: false });
    try {
      // Not ready is not an error: a call answers unavailable (the gateway: 503 + Retry-After).
      await expect(
        client.login({ email: OWNER.email, password: OWNER.password, clientIp: '' }),
      ).rejects.toMatchObject({ code: 'unavailable' });
    } finally {
      client.close();
    }

    await pg.restore();
    const ms = await waitFor(
      async () => (await health(port, AdminService.typeName)) === 'SERVING',
      READY_WITHIN_MS,
      'admin to be ready after PostgreSQL returned',
    );
    report('admin ready after PostgreSQL stopped blackholing', ms);
    expect(admin.child.pid).toBe(pid);
    expect(admin.child.exitCode).toBeNull();
  });

  it('gateway started while admin, issuer and billing are unreachable: live, /readyz 503, then 200 within 5 s of their being reachable', async () => {
    const vars = await env();
    const ports = {
      admin: Number(vars.ADMIN_LISTEN_ADDRESS?.split(':')[1]),
      billing: Number(vars.BILLING_LISTEN_ADDRESS?.split(':')[1]),
      issuer: await freePort(),
      http: await freePort(),
    };
    // The services run (reaching one another directly); the gateway reaches each through a
    // proxy that refuses until the test opens it.
    const services = [
      start('billing', 'billing', { ...vars, BILLING_ISSUER_ADDRESS: `127.0.0.1:${ports.issuer}` }),
      start('admin', 'admin', vars),
      start('issuer', 'issuer', { ...vars, ISSUER_LISTEN_ADDRESS: `127.0.0.1:${ports.issuer}` }),
    ];
    const ready = [
      [ports.billing, BillingService.typeName],
      [ports.admin, AdminService.typeName],
      [ports.issuer, IssuerService.typeName],
    ] as const;
    await waitFor(
      async () => {
        for (const s of services)
          if (s.child.exitCode !== null) throw new Error(`${s.name} exited:\n${s.output()}`);
        const statuses = await Promise.all(ready.map(([port, name]) => health(port, name)));
        return statuses.every((s) => s === 'SERVING');
      },
      60_000,
      'admin, issuer and billing to be ready',
    );
    const front = {
      admin: await TcpProxy.start({ host: '127.0.0.1', port: ports.admin }),
      issuer: await TcpProxy.start({ host: '127.0.0.1', port: ports.issuer }),
      billing: await TcpProxy.start({ host: '127.0.0.1', port: ports.billing }),
    };
    proxies.push(front.admin, front.issuer, front.billing);
    await Promise.all(Object.values(front).map((p) => p.refuse()));

    const baseUrl = `http://127.0.0.1:${ports.http}`;
    const gateway = start('gateway', 'gateway', {
      ...vars,
      PORT: String(ports.http),
      GATEWAY_ADMIN_ADDRESS: `127.0.0.1:${front.admin.port}`,
      GATEWAY_ISSUER_ADDRESS: `127.0.0.1:${front.issuer.port}`,
      GATEWAY_BILLING_ADDRESS: `127.0.0.1:${front.billing.port}`,
    });
    await waitFor(
      async () => (await fetch(`${baseUrl}/healthz`)).status === 200,
      30_000,
      'the gateway to listen',
    );
    const pid = gateway.child.pid;
    await staysUp(gateway, () => readyz(baseUrl), 503);
    expect((await fetch(`${baseUrl}/healthz`)).status).toBe(200);

    await Promise.all(Object.values(front).map((p) => p.restore()));
    const ms = await waitFor(async () => (await readyz(baseUrl)) === 200, READY_WITHIN_MS, '/readyz 200');
    report('gateway /readyz 200 after its services became reachable', ms);
    expect(gateway.child.pid).toBe(pid);
    expect(gateway.child.exitCode).toBeNull();
  });

  it('SIGTERM while waiting for PostgreSQL and Redis stops the process at once, exit 0 (no SIGKILL)', async () => {
    const pg = await postgresProxy();
    const cache = await redisProxy();
    await pg.refuse();
    await cache.refuse();
    const port = await freePort();
    const vars = await env({ databaseUrl: viaProxy(database.url, pg), redisUrl: viaProxy(redis.url, cache) });
    const billing = start('billing-term', 'billing', {
      ...vars,
      BILLING_LISTEN_ADDRESS: `127.0.0.1:${port}`,
    });
    await listening(billing, port);
    await waitFor(
      async () => billing.output().includes('migrations: waiting for a dependency'),
      10_000,
      'billing to wait for PostgreSQL',
    );
    const startedAt = performance.now();
    const code = await billing.stop();
    const ms = Math.round(performance.now() - startedAt);
    report('billing stopped by SIGTERM while waiting', ms);
    expect(code).toBe(0);
    expect(ms).toBeLessThan(3_000);
  });

  it.each([
    ['admin', 'ADMIN_SESSION_TTL_SECONDS', 'forever'],
    ['billing', 'BILLING_PROVIDER', 'paypal'],
    ['issuer', 'RELAYPLANE_KEK', Buffer.alloc(8).toString('base64')],
    ['gateway', 'PORT', '70000'],
  ])(
    '%s exits 78 (EX_CONFIG) naming %s when it is invalid, even with its dependencies away',
    async (app, variable, value) => {
      const pg = await postgresProxy();
      await pg.refuse();
      const proc = start(`config-${app}`, app, {
        ...(await env({ databaseUrl: viaProxy(database.url, pg) })),
        [variable]: value,
      });
      let timer: NodeJS.Timeout | undefined;
      const code = await Promise.race([
        proc.exited,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`${app} did not exit:\n${proc.output()}`)), 20_000);
        }),
      ]).finally(() => clearTimeout(timer));
      expect(code).toBe(78);
      expect(proc.output()).toContain(`configuration error: ${variable}`);
    },
  );
});
