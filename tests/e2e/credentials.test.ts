/**
 * The credential path end to end: billing, admin, two issuers and two gateways as separate
 * processes on PostgreSQL and Redis (the issuers reach Redis through a proxy the test can cut).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { createVerifier, VerificationError } from '@relayplane/verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';

const OWNER = { email: 'ops@example.test', password: 'credential path password' };
const CAP = 5;

describe('credential issuance across two gateways and two issuers', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let redisProxy: TcpProxy;
  let system: Distributed;
  let gateways: Api[];
  let tenantCounter = 0;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_creds');
    redis = createTestRedis('e2e_creds');
    const target = new URL(redis.url);
    redisProxy = await TcpProxy.start({ host: target.hostname, port: Number(target.port || 6379) });
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(
      plans,
      // The per-key issuance rate out of the way: the cap rounds send 25 requests at once.
      `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP}, max_api_keys: 3, max_issuance_per_second_per_key: 1000000 }\n`,
    );
    system = await startDistributed({
      label: 'creds',
      databaseUrl: database.url,
      redisUrl: redis.url,
      issuerRedisUrl: `redis://127.0.0.1:${redisProxy.port}`,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 3).toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 2, gateway: 2 },
      // 11 tenants sign up from 127.0.0.1: over the per-IP sign-up limit's default of 10.
      extraEnv: { RELAYPLANE_PLANS_FILE: plans, ADMIN_SIGNUP_MAX_PER_IP: '10000' },
    });
    // The rounds start at once: startDistributed returns only when every issuer serves issuance
    // and the gateways, started after them, are ready (see there for the start-up 503s this
    // file used to see).
    gateways = await Promise.all(system.baseUrls.map((u) => Api.connect(u)));
  }, 180_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redisProxy?.close();
    await redis?.clean();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  /** A fresh tenant on the free plan with a project and an API key. */
  async function tenant(): Promise<{
    auth: { authorization: string };
    key: string;
    keyId: string;
    projectId: string;
  }> {
    const [a] = gateways;
    if (!a) throw new Error('no gateway');
    const n = ++tenantCounter;
    const credentials = { email: `t${n}@example.test`, password: 'tenant password 123' };
    expect(
      (await a.request('POST', '/admin/v1/auth/signup', { body: { ...credentials, tenant_name: `T${n}` } }))
        .status,
    ).toBe(201);
    const login = await a.request('POST', '/admin/v1/auth/login', { body: credentials });
    const auth = { authorization: `Bearer ${login.body.token}` };
    const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    const key = await a.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    return { auth, key: key.body.key, keyId: key.body.api_key.id, projectId: project.body.id };
  }

  const issue = (gw: Api, key: string, body: object = {}) =>
    gw.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body });

  it(`never exceeds a cap of ${CAP} under ${5 * CAP} concurrent requests over both gateways, round after round`, async () => {
    for (let round = 0; round < 8; round++) {
      const t = await tenant();
      const results = await Promise.all(
        Array.from({ length: 5 * CAP }, (_, i) => issue(gateways[i % gateways.length] as Api, t.key)),
      );
      const created = results.filter((r) => r.status === 201);
      const refused = results.filter((r) => r.status === 402);
      expect(created.length, `round ${round}`).toBe(CAP);
      expect(refused.length, `round ${round}`).toBe(4 * CAP);
      for (const r of refused) expect(r.body.error).toMatch(/upgrade/);
      expect(new Set(created.map((r) => r.body.jti)).size).toBe(CAP);

      // Revoking one frees exactly one slot.
      const revoke = await gateways[1]?.request(
        'POST',
        `/admin/v1/credentials/${created[0]?.body.jti}/revoke`,
        { headers: t.auth },
      );
      expect(revoke?.status).toBe(200);
      const again = await Promise.all([issue(gateways[0] as Api, t.key), issue(gateways[1] as Api, t.key)]);
      expect(again.map((r) => r.status).sort()).toEqual([201, 402]);
    }
  }, 120_000);

  it('answers each error of the path with its exact status and {error}', async () => {
    const [a, b] = gateways as [Api, Api];
    const t = await tenant();
    const cases: [string, Promise<{ status: number; body: { error: string } }>, number, RegExp][] = [
      ['no key', a.request('POST', '/api/v1/credentials', { body: {} }), 401, /missing API key/],
      ['malformed key', issue(a, 'svc_live_nothex'), 401, /^invalid or expired token$/],
      ['unknown key', issue(a, `svc_test_${'f'.repeat(64)}`), 401, /^invalid or expired token$/],
      ['scope not granted', issue(a, t.key, { scopes: ['relay:publish'] }), 403, /not granted/],
      ['unknown scope', issue(a, t.key, { scopes: ['admin'] }), 400, /unknown scope/],
      ['ttl too short', issue(a, t.key, { ttl_seconds: 10 }), 400, /ttl_seconds/],
      ['ttl over the plan', issue(a, t.key, { ttl_seconds: 3600 }), 400, /maximum of 900/],
      ['unknown field', issue(a, t.key, { ttl: 60 }), 400, /unknown field "ttl"/],
    ];
    for (const [what, pending, status, message] of cases) {
      const res = await pending;
      expect(res.status, what).toBe(status);
      expect(Object.keys(res.body), what).toEqual(['error']);
      expect(res.body.error, what).toMatch(message);
    }

    // A revoked API key stops working on the other gateway within a second.
    const revoked = await a.request('DELETE', `/admin/v1/projects/${t.projectId}/api-keys/${t.keyId}`, {
      headers: t.auth,
    });
    expect(revoked.status).toBe(200);
    const took = await waitFor(
      async () => (await issue(b, t.key)).status === 401,
      1_000,
      'the revoked key to be refused',
    );
    expect(took).toBeLessThan(1_000);
    expect((await issue(a, t.key)).body).toEqual({ error: 'invalid or expired token' });
  });

  it('fails closed with 503 and Retry-After when Redis is unreachable, and recovers', async () => {
    const [a] = gateways as [Api];
    const t = await tenant();
    redisProxy.cut();
    try {
      const res = await issue(a, t.key);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(res.text).not.toContain('eyJ');
    } finally {
      redisProxy.restore();
    }
    await waitFor(async () => (await issue(a, t.key)).status === 201, 10_000, 'issuance to recover');
  });

  it('a revoked credential: 401 at assignment, inactive at introspection, in the feed, and refused by @relayplane/verifier within a second', async () => {
    const [a, b] = gateways as [Api, Api];
    const ownerLogin = await a.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const owner = { authorization: `Bearer ${ownerLogin.body.token}` };
    const relay = await a.request('POST', '/admin/v1/relays', {
      headers: owner,
      body: { region: 'eu-west', host: 'relay.e2e.example', port: 4433 },
    });
    expect(relay.status).toBe(201);
    const relayAuth = { authorization: `Bearer ${relay.body.token}` };
    expect(
      (await b.request('POST', '/v1/relays/heartbeat', { headers: relayAuth, body: { load: 0.1 } })).status,
    ).toBe(200);

    const verifier = createVerifier({ baseUrl: b.baseUrl, relayToken: relay.body.token });
    try {
      await verifier.ready;
      const t = await tenant();
      const issued = await issue(a, t.key, { region: 'eu-west' });
      expect(issued.status).toBe(201);
      const { token, jti } = issued.body;
      expect(issued.body.relays[0]).toMatchObject({ host: 'relay.e2e.example', status: 'healthy' });
      const claims = await verifier.verify(token, { scope: 'relay:session' });
      expect(claims).toMatchObject({ jti, pid: t.projectId, mode: 'live' });
      expect(claims.exp * 1000).toBe(Date.parse(issued.body.expires_at));
      expect(
        (await b.request('GET', '/v1/relays/assignment', { headers: { authorization: `Bearer ${token}` } }))
          .status,
      ).toBe(200);

      const revokedAt = Date.now();
      expect(
        (await a.request('POST', `/admin/v1/credentials/${jti}/revoke`, { headers: t.auth })).status,
      ).toBe(200);
      const learnt = await waitFor(
        async () => verifier.isRevoked(jti),
        1_000,
        'the verifier to learn the revocation',
        5,
      );
      console.log(
        `revocation known to the verifier ${learnt} ms after the revoke call returned (${Date.now() - revokedAt} ms after it was sent)`,
      );
      await expect(verifier.verify(token)).rejects.toMatchObject({ code: 'revoked' });
      await expect(verifier.verify(token)).rejects.toBeInstanceOf(VerificationError);

      const assignment = await a.request('GET', '/v1/relays/assignment', {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(assignment.status).toBe(401);
      expect(assignment.body).toEqual({ error: 'invalid or expired token' });
      const introspection = await b.request('POST', '/v1/credentials/introspect', {
        headers: relayAuth,
        body: { token },
      });
      expect(introspection.body).toEqual({ active: false });
      const feed = await a.request('GET', '/v1/credentials/revocations?cursor=0', { headers: relayAuth });
      expect(feed.body.revocations.map((r: { jti: string }) => r.jti)).toContain(jti);
    } finally {
      await verifier.close();
    }
  });

  it('checked every response against the OpenAPI document', () => {
    expect(gateways.reduce((n, g) => n + g.checked, 0)).toBeGreaterThan(100);
  });
});
