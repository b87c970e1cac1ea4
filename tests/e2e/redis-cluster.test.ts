/**
 * The distributed topology on a Redis Cluster (issue 22, item 1): billing, admin, three issuers
 * and two gateways as processes on PostgreSQL and a private 3-master cluster with no replicas
 * (tests/support/redis-cluster.ts), every app switched to it by RELAYPLANE_REDIS_CLUSTER_NODES.
 * The cap holds exactly across both gateways, revocation frees a slot, the login throttle counts
 * in the cluster, a bus message crosses the cluster (every node requires a password, given in
 * the node URLs); then one master is killed and the tenants
 * whose slot sets live on the other two keep issuing while the others get 503 + Retry-After.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, type ApiResponse } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';
import { runToCompletion } from '../support/processes.ts';
import { RedisCluster } from '../support/redis-cluster.ts';

const OWNER = { email: 'ops@example.test', password: 'redis cluster password' };
const CAP = 40;
const LOGIN_LIMIT = 3;
const PREFIX = 'rc:';
/** Every node's `requirepass` (the apps read it from the node URLs of RELAYPLANE_REDIS_CLUSTER_NODES). */
const CLUSTER_PASSWORD = 'cluster s3cret/1';

interface Tenant {
  id: string;
  email: string;
  auth: { authorization: string };
  key: string;
}

describe('Redis Cluster: two gateways and three issuers on three masters', () => {
  let cluster: RedisCluster;
  let database: TestDatabase;
  let system: Distributed;
  let gateways: [Api, Api];
  let platform: { authorization: string };
  let tenants = 0;

  beforeAll(async () => {
    // Every node requires a password, as production clusters do: the apps get it in the node URLs.
    cluster = await RedisCluster.start(3, { password: CLUSTER_PASSWORD });
    database = await createTestDatabase('e2e_redis_cluster');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(
      plans,
      `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP}, max_issuance_per_second_per_key: 100000 }\n`,
    );
    system = await startDistributed({
      label: 'redis-cluster',
      databaseUrl: database.url,
      // Unset: the cluster variable alone names the apps' Redis.
      redisUrl: '',
      redisPrefix: PREFIX,
      kek: Buffer.alloc(32, 22).toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 3, gateway: 2 },
      extraEnv: { RELAYPLANE_PLANS_FILE: plans, RELAYPLANE_REDIS_CLUSTER_NODES: cluster.seeds },
      appEnv: {
        admin: { ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP: String(LOGIN_LIMIT), ADMIN_SIGNUP_MAX_PER_IP: '100' },
        // Only the bus can tell the second gateway of a key change within this test.
        gateway: { GATEWAY_JWKS_CACHE_MS: '300000' },
      },
    });
    gateways = (await Promise.all(system.baseUrls.map((u) => Api.connect(u)))) as [Api, Api];
    const login = await gateways[0].request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
    platform = { authorization: `Bearer ${login.body.token}` };
  }, 180_000);

  afterAll(async () => {
    // Every process shuts down cleanly, with a master still down (exit 0, not SIGKILL).
    const codes = (await system?.stop()) ?? [];
    await cluster?.stop();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  /** A fresh tenant on the free plan, with an API key. */
  async function tenant(): Promise<Tenant> {
    const [a] = gateways;
    const n = ++tenants;
    const credentials = { email: `cluster-${n}@example.test`, password: 'tenant password 123' };
    const signup = await a.request('POST', '/admin/v1/auth/signup', {
      body: { ...credentials, tenant_name: `Cluster ${n}` },
    });
    expect(signup.status).toBe(201);
    const login = await a.request('POST', '/admin/v1/auth/login', { body: credentials });
    expect(login.status).toBe(200);
    const auth = { authorization: `Bearer ${login.body.token}` };
    const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    const key = await a.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    return { id: signup.body.tenant.id, email: credentials.email, auth, key: key.body.key };
  }

  const issue = (gw: Api, key: string) =>
    gw.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body: {} });

  const slotKey = (tenantId: string) => `${PREFIX}slots:{${tenantId}}`;

  it('refuses a Redis URL and cluster nodes set for one app: exit 78 naming both variables', async () => {
    const both = await runToCompletion('apps/issuer/src/main.ts', {
      ...system.env,
      ISSUER_REDIS_URL: 'redis://127.0.0.1:6379',
      ISSUER_REDIS_CLUSTER_NODES: cluster.seeds,
    });
    expect(both.code, both.output).toBe(78);
    expect(both.output).toContain('ISSUER_REDIS_CLUSTER_NODES and ISSUER_REDIS_URL are both set');
    expect(both.output).not.toContain(CLUSTER_PASSWORD);
  });

  it('holds the cap exactly across both gateways: of 2 × cap concurrent requests, cap get 201 and the rest 402', async () => {
    const t = await tenant();
    const answers = await Promise.all(
      Array.from({ length: 2 * CAP }, (_, i) => issue(gateways[i % 2] as Api, t.key)),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(CAP);
    expect(statuses.filter((s) => s === 402)).toHaveLength(CAP);
    // The leases live in the tenant's slot set on the master of its hash tag.
    const master = await cluster.masterOf(`{${t.id}}`);
    expect(await cluster.masterOf(slotKey(t.id))).toBe(master);
    expect(await cluster.keys(slotKey(t.id))).toEqual({ [slotKey(t.id)]: 'zset' });
  });

  it('frees the slot of a revoked credential on every gateway and marks it revoked in the cluster', async () => {
    const t = await tenant();
    const held: ApiResponse[] = [];
    for (let i = 0; i < CAP; i++) held.push(await issue(gateways[i % 2] as Api, t.key));
    expect(held.map((r) => r.status)).toEqual(Array(CAP).fill(201));
    expect((await issue(gateways[0], t.key)).status).toBe(402);
    expect((await issue(gateways[1], t.key)).status).toBe(402);

    const jti = held[0]?.body.jti as string;
    const revoked = await gateways[1].request('POST', `/admin/v1/credentials/${jti}/revoke`, {
      headers: t.auth,
    });
    expect(revoked.status).toBe(200);
    expect(await cluster.keys(`${PREFIX}revoked:{${jti}}`)).toEqual({ [`${PREFIX}revoked:{${jti}}`]: '1' });
    // Exactly one slot came free, whichever gateway asks.
    expect((await issue(gateways[0], t.key)).status).toBe(201);
    expect((await issue(gateways[1], t.key)).status).toBe(402);
  });

  it('counts login attempts in the cluster: past the limit both gateways answer 429 + Retry-After', async () => {
    const t = await tenant();
    const attempt = (gw: Api) =>
      gw.request('POST', '/admin/v1/auth/login', {
        body: { email: t.email, password: 'wrong password 123' },
      });
    for (let i = 0; i < LOGIN_LIMIT; i++) expect((await attempt(gateways[i % 2] as Api)).status).toBe(401);
    for (const gw of gateways) {
      const refused = await attempt(gw);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    // The tight limit's counter (account and client IP) holds every attempt, and the window's
    // refusal was recorded once (the two-key script, one hash tag).
    const account = createHash('sha256').update(t.email).digest('hex');
    const counters = Object.entries(await cluster.keys(`${PREFIX}*login:acct-ip:${account}:*`)).filter(
      ([k]) => !k.includes('refused'),
    );
    expect(counters.map(([, v]) => v)).toEqual([String(LOGIN_LIMIT + 2)]);
    const recorded = await cluster.keys(`${PREFIX}*login:refused:{login:acct-ip:${account}:*}:recorded`);
    expect(Object.keys(recorded)).toHaveLength(1);
  });

  it('carries a bus message across the cluster: a signing key revoked on one gateway leaves the other gateway’s JWKS', async () => {
    const keys = await gateways[0].request('GET', '/admin/v1/signing-keys', { headers: platform });
    expect(keys.status).toBe(200);
    const next = (keys.body.keys as { kid: string; state: string }[]).find((k) => k.state === 'next');
    expect(next).toBeDefined();
    const kid = next?.kid as string;
    const published = async (gw: Api) =>
      ((await gw.request('GET', '/v1/credentials/jwks')).body.keys as { kid: string }[]).map((k) => k.kid);
    expect(await published(gateways[1])).toContain(kid);
    const revoked = await gateways[0].request('POST', `/admin/v1/signing-keys/${kid}/revoke`, {
      headers: platform,
    });
    expect(revoked.status).toBe(200);
    // The second gateway's copy is good for 300 s: only the bus announcement removes the key now.
    await waitFor(
      async () => !(await published(gateways[1])).includes(kid),
      5_000,
      'the revoked kid to leave',
    );
  });

  it('with one master of three killed: only 201 or 503 + Retry-After; tenants on the other masters keep getting 201', async () => {
    // Tenants until the first one's master (the victim) and at least one other master hold some.
    const all: (Tenant & { master: number })[] = [];
    while (all.length < 12) {
      const t = await tenant();
      all.push({ ...t, master: await cluster.masterOf(`{${t.id}}`) });
      const victim = all[0]?.master;
      if (all.length >= 3 && all.some((x) => x.master !== victim)) break;
    }
    const victim = all[0]?.master as number;
    const lost = all.filter((t) => t.master === victim);
    const surviving = all.filter((t) => t.master !== victim);
    expect(surviving.length).toBeGreaterThan(0);
    for (const t of all) expect((await issue(gateways[0], t.key)).status).toBe(201);

    await cluster.kill(victim);
    const answers: { tenant: Tenant; status: number; retryAfter: string | null }[] = [];
    const round = async () => {
      for (const gw of gateways) {
        const results = await Promise.all(all.map((t) => issue(gw, t.key).then((r) => ({ t, r }))));
        for (const { t, r } of results)
          answers.push({ tenant: t, status: r.status, retryAfter: r.headers.get('retry-after') });
      }
    };
    // Right after the crash (the others still think it may come back) and once they marked it failed.
    for (let i = 0; i < 3; i++) await round();
    await cluster.waitMarkedFailed(victim);
    for (let i = 0; i < 3; i++) await round();

    const of = (group: Tenant[]) => answers.filter((a) => group.some((t) => t.id === a.tenant.id));
    expect(of(surviving).map((a) => a.status)).toEqual(Array(of(surviving).length).fill(201));
    for (const a of of(lost)) {
      expect(a.status).toBe(503);
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
    }
    expect(of(lost).length).toBe(lost.length * 2 * 6);
  });
});
