/**
 * The concurrent-connection cap when Redis forgets: billing, admin, two issuers and two gateways
 * as separate processes on PostgreSQL and a private redis-server, which the test flushes and
 * then restarts empty (no persistence), as an operator's Redis might after a crash or a
 * failover to a replica that missed the writes.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, type ApiResponse } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';
import { RedisServer } from '../support/redis-server.ts';

const OWNER = { email: 'ops@example.test', password: 'redis loss password' };
const CAP = 3;
const PREFIX = 'rl:';

describe('the cap after Redis lost its data (two gateways, two issuers, a private Redis)', () => {
  let database: TestDatabase;
  let redis: RedisServer;
  let system: Distributed;
  let gateways: Api[];

  beforeAll(async () => {
    redis = await RedisServer.start();
    database = await createTestDatabase('e2e_redis_loss');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(plans, `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP} }\n`);
    system = await startDistributed({
      label: 'redis-loss',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: PREFIX,
      kek: Buffer.alloc(32, 7).toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 2, gateway: 2 },
      extraEnv: { RELAYPLANE_PLANS_FILE: plans },
    });
    gateways = await Promise.all(system.baseUrls.map((u) => Api.connect(u)));
  }, 180_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.stop();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  /** A fresh tenant on the free plan, with an API key. */
  async function tenant(): Promise<{ id: string; auth: { authorization: string }; key: string }> {
    const [a] = gateways as [Api];
    const credentials = { email: 'loss@example.test', password: 'tenant password 123' };
    const signup = await a.request('POST', '/admin/v1/auth/signup', {
      body: { ...credentials, tenant_name: 'Loss' },
    });
    expect(signup.status).toBe(201);
    const login = await a.request('POST', '/admin/v1/auth/login', { body: credentials });
    const auth = { authorization: `Bearer ${login.body.token}` };
    const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    const key = await a.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    return { id: signup.body.tenant.id, auth, key: key.body.key };
  }

  const issue = (gw: Api, key: string) =>
    gw.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body: {} });

  /** Every gateway answers 402 for the tenant, with the plan's message. */
  async function refusedEverywhere(key: string, when: string): Promise<void> {
    for (const gw of gateways) {
      const res = await issue(gw, key);
      expect(res.status, `${when}, ${gw.baseUrl}`).toBe(402);
      expect(res.body.error, when).toMatch(/at most 3 concurrent connections.*upgrade the plan/);
    }
  }

  /** The tenant's slots as Redis holds them: jti → lease expiry (ms). */
  const slotsOf = (tenantId: string) =>
    redis.with(async (client) => {
      const flat = await client.zrange(`${PREFIX}slots:{${tenantId}}`, '0', '-1', 'WITHSCORES');
      const slots: Record<string, number> = {};
      for (let i = 0; i < flat.length; i += 2) slots[flat[i] as string] = Number(flat[i + 1]);
      return slots;
    });

  it('answers 402 on both gateways for a full tenant after FLUSHALL and after an empty Redis restart; a revocation frees one slot', async () => {
    const started = Date.now();
    const t = await tenant();
    const held: ApiResponse[] = [];
    for (let i = 0; i < CAP; i++) {
      const res = await issue(gateways[i % gateways.length] as Api, t.key);
      expect(res.status).toBe(201);
      held.push(res);
    }
    await refusedEverywhere(t.key, 'at the cap');
    // Each slot lasts the connect window from issuance (the credential has not connected to a
    // relay), and never beyond its credential's expiry (docs/credentials.md, Sessions).
    const leases = await slotsOf(t.id);
    expect(Object.keys(leases).sort()).toEqual(held.map((r) => r.body.jti).sort());
    for (const r of held) expect(leases[r.body.jti]).toBeLessThanOrEqual(Date.parse(r.body.expires_at));
    /** The same leases as before the loss, rebuilt from PostgreSQL's issuance times (ms apart at most a second). */
    const expectRebuilt = (rebuilt: Record<string, number>) => {
      expect(Object.keys(rebuilt).sort()).toEqual(Object.keys(leases).sort());
      for (const [jti, at] of Object.entries(rebuilt))
        expect(Math.abs(at - (leases[jti] as number))).toBeLessThan(1_000);
    };

    // (a) FLUSHALL: every slot, every marker gone.
    await redis.with((client) => client.flushall());
    expect(await slotsOf(t.id)).toEqual({});
    await refusedEverywhere(t.key, 'after FLUSHALL');
    // Rebuilt from PostgreSQL: the same leases.
    expectRebuilt(await slotsOf(t.id));

    // (b) The server crashes and comes back empty. While it is down: 503 + Retry-After (or
    // 402), never 201.
    await redis.kill();
    const during: number[] = [];
    for (const gw of gateways) {
      const res = await issue(gw, t.key);
      during.push(res.status);
      if (res.status === 503) {
        expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
        expect(Object.keys(res.body)).toEqual(['error']);
      }
    }
    expect(during.filter((s) => s !== 503 && s !== 402)).toEqual([]);
    await redis.restart();
    expect(await slotsOf(t.id)).toEqual({});
    // Until the issuers' connections are back, 503; then 402 — never 201.
    const after: number[] = [];
    for (const gw of gateways) {
      await waitFor(
        async () => {
          const res = await issue(gw, t.key);
          after.push(res.status);
          return res.status !== 503;
        },
        20_000,
        `${gw.baseUrl} to answer again after the restart`,
      );
    }
    expect(after.filter((s) => s !== 503 && s !== 402)).toEqual([]);
    console.log(
      `while Redis was down: ${during.join(', ')}; after the restart: ${after.filter((s) => s === 503).length} × 503, then 402`,
    );
    await refusedEverywhere(t.key, 'after an empty restart');
    expectRebuilt(await slotsOf(t.id));

    // Revoking one frees exactly one slot, whichever gateway asks next.
    const [revoked] = held;
    const revoke = await (gateways[1] as Api).request(
      'POST',
      `/admin/v1/credentials/${revoked?.body.jti}/revoke`,
      { headers: t.auth },
    );
    expect(revoke.status).toBe(200);
    const again = await Promise.all(gateways.map((gw) => issue(gw, t.key)));
    expect(again.map((r) => r.status).sort()).toEqual([201, 402]);
    const replacement = again.find((r) => r.status === 201) as ApiResponse;
    expect(Object.keys(await slotsOf(t.id)).sort()).toEqual(
      [...held.slice(1).map((r) => r.body.jti), replacement.body.jti].sort(),
    );
    await refusedEverywhere(t.key, 'full again');
    console.log(`fill, FLUSHALL, crash and empty restart, revocation: ${Date.now() - started} ms`);
    expect(Date.now() - started).toBeLessThan(60_000);
  });
});
