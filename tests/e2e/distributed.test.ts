/**
 * The four apps as separate processes on PostgreSQL and Redis, the way the Helm chart runs
 * them. PostgreSQL is reached through a proxy the test can cut.
 */
import { createHash } from 'node:crypto';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';
import type { Proc } from '../support/processes.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';

const OWNER = { email: 'ops@example.test', password: 'distributed mode password' };

describe('distributed mode: four processes on PostgreSQL + Redis', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let proxy: TcpProxy;
  let api: Api;
  let system: Distributed | undefined;
  let procs: Proc[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('e2e_dist');
    redis = createTestRedis('e2e_dist');
    const target = new URL(database.url);
    proxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    const viaProxy = new URL(database.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    system = await startDistributed({
      label: 'dist',
      databaseUrl: viaProxy.toString(),
      migrateDatabaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 9).toString('base64'),
      bootstrap: OWNER,
    });
    procs = system.procs;
    api = await Api.connect(system.baseUrl);
  }, 120_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await proxy?.close();
    await redis?.clean();
    await database?.drop();
    // Graceful shutdown on SIGTERM: every process exits 0.
    expect(codes).toEqual(procs.map(() => 0));
  });

  it('serves liveness and readiness', async () => {
    expect((await api.request('GET', '/healthz')).status).toBe(200);
    const ready = await api.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.services).toEqual({ admin: 'SERVING', issuer: 'SERVING', billing: 'SERVING' });
  });

  it('logs in the bootstrap owner, creates and lists a project, and answers 409 {error} for a duplicate', async () => {
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
    const auth = { authorization: `Bearer ${login.body.token}` };
    const created = await api.request('POST', '/admin/v1/projects', {
      headers: auth,
      body: { name: 'edge-demo' },
    });
    expect(created.status).toBe(201);
    const list = await api.request('GET', '/admin/v1/projects', { headers: auth });
    expect(list.body.projects.map((p: { id: string }) => p.id)).toContain(created.body.id);
    const dup = await api.request('POST', '/admin/v1/projects', {
      headers: auth,
      body: { name: 'edge-demo' },
    });
    expect(dup.status).toBe(409);
    expect(Object.keys(dup.body)).toEqual(['error']);
  });

  it('publishes a JWKS whose kids are RFC 7638 thumbprints, with cache headers and 304', async () => {
    const res = await api.request('GET', '/v1/credentials/jwks');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=300');
    for (const key of res.body.keys) {
      const canonical = JSON.stringify({ crv: key.crv, kty: key.kty, x: key.x });
      expect(key.kid).toBe(createHash('sha256').update(canonical).digest('base64url'));
    }
    const etag = res.headers.get('etag') ?? '';
    expect(
      (await api.request('GET', '/v1/credentials/jwks', { headers: { 'if-none-match': etag } })).status,
    ).toBe(304);
  });

  it('sees plans and pricing, and rejects bad input with {error}', async () => {
    expect((await api.request('GET', '/v1/plans')).status).toBe(200);
    expect((await api.request('GET', '/v1/pricing')).status).toBe(200);
    const bad = await api.request('POST', '/admin/v1/auth/login', {
      raw: '{',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.status).toBe(400);
    const noAuth = await api.request('GET', '/admin/v1/projects');
    expect(noAuth.status).toBe(401);
  });

  it('turns /readyz to 503 within 5 s when PostgreSQL is cut, keeps /healthz 200, and recovers within 5 s', async () => {
    proxy.cut();
    const down = await waitFor(
      async () => (await api.request('GET', '/readyz')).status === 503,
      5_000,
      'readyz 503',
    );
    const notReady = await api.request('GET', '/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body.error).toMatch(/not ready/);
    expect((await api.request('GET', '/healthz')).status).toBe(200);

    proxy.restore();
    const up = await waitFor(
      async () => (await api.request('GET', '/readyz')).status === 200,
      5_000,
      'readyz 200',
    );
    expect(down).toBeLessThan(5_000);
    expect(up).toBeLessThan(5_000);
    // Still the same processes: nothing restarted.
    for (const p of procs) expect(p.child.exitCode).toBeNull();
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
  }, 30_000);

  it('checked every response against the OpenAPI document', () => {
    expect(api.checked).toBeGreaterThan(10);
  });
});
