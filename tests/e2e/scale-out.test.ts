/**
 * Scale-out, proven on this machine: 2 gateways, 3 issuers (a 4th added while load runs,
 * one killed with SIGKILL during load), 1 admin, 1 billing, as processes on the machine's
 * PostgreSQL and Redis. The gateways find the issuers through a DNS name (the stand-in for
 * the chart's headless Service) and balance over them with round-robin issuance streams.
 *
 * Every figure the suite measures is printed (rounds, successes per round, propagation
 * times, per-replica shares), so the CI log holds the numbers.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IssuerService } from '@relayplane/proto/issuer';
import { connect } from '@relayplane/shared/rpc';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { waitFor } from '../support/ports.ts';
import { type IssuerReplica, type ScaleOut, startScaleOut } from '../support/scale-out.ts';

const OWNER = { email: 'scale@example.test', password: 'scale out password' };
const CAP = 5;
const CONCURRENT = 200;
const ROUNDS = 50;
const MAINTENANCE_SECONDS = 1;
const ROTATION_SECONDS = 600;

interface Outcome {
  status: number;
  retryAfter: string | null;
  jti?: string;
  error?: string;
  at: number;
}

/** Closed-loop load: `concurrency` workers, spread over the gateways, for `ms`. */
async function load(
  baseUrls: string[],
  key: string,
  ms: number,
  concurrency: number,
  during?: (elapsedMs: number) => Promise<void>,
): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const start = Date.now();
  const deadline = start + ms;
  const workers = Array.from({ length: concurrency }, async (_, w) => {
    const url = `${baseUrls[w % baseUrls.length]}/api/v1/credentials`;
    while (Date.now() < deadline) {
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'x-api-key': key, 'content-type': 'application/json' },
          body: '{"ttl_seconds":60}',
        });
        const body = (await res.json()) as { jti?: string; error?: string };
        outcomes.push({
          status: res.status,
          retryAfter: res.headers.get('retry-after'),
          jti: body.jti,
          error: body.error,
          at: Date.now(),
        });
      } catch (err) {
        outcomes.push({ status: 0, retryAfter: null, error: String(err), at: Date.now() });
      }
    }
  });
  await Promise.all([...workers, during?.(0)]);
  return outcomes;
}

function tally(outcomes: Outcome[]): Record<string, number> {
  const byStatus: Record<string, number> = {};
  for (const o of outcomes) byStatus[o.status] = (byStatus[o.status] ?? 0) + 1;
  return byStatus;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('scale-out: 2 gateways over 3+ issuers behind one DNS name', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: ScaleOut;
  let gateways: [Api, Api];
  let db: pg.Client;
  let ownerAuth: { authorization: string };
  let ownerKey: string;
  let tenants = 0;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_scale');
    redis = createTestRedis('e2e_scale');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    // The per-key issuance rate out of the way: these rounds and loads test the cap and the spread.
    writeFileSync(
      plans,
      `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP}, max_issuance_per_second_per_key: 1000000 }\n` +
        '  enterprise:\n    limits: { max_issuance_per_second_per_key: 1000000 }\n',
    );
    system = await startScaleOut({
      label: 'scale',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 9).toString('base64'),
      bootstrap: OWNER,
      issuers: 3,
      gateways: 2,
      extraEnv: { RELAYPLANE_PLANS_FILE: plans },
      issuerEnv: {
        ISSUER_GRPC_MAX_CONNECTION_AGE_MS: '2000',
        ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS: String(MAINTENANCE_SECONDS),
        ISSUER_KEY_ROTATION_INTERVAL_SECONDS: String(ROTATION_SECONDS),
      },
      gatewayEnv: {
        GATEWAY_ISSUANCE_STREAM_MAX_AGE_MS: '2000',
        GATEWAY_GRPC_DNS_MIN_INTERVAL_MS: '200',
        GATEWAY_JWKS_CACHE_MS: '1000',
      },
    });
    gateways = (await Promise.all(system.baseUrls.map((u) => Api.connect(u)))) as [Api, Api];
    db = new pg.Client({ connectionString: database.url });
    await db.connect();

    // The bootstrap tenant (enterprise plan, cap 100 000) carries the load tests.
    const login = await gateways[0].request('POST', '/admin/v1/auth/login', { body: OWNER });
    ownerAuth = { authorization: `Bearer ${login.body.token}` };
    const project = await gateways[0].request('POST', '/admin/v1/projects', {
      headers: ownerAuth,
      body: { name: 'load' },
    });
    const key = await gateways[0].request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: ownerAuth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    ownerKey = key.body.key;
  }, 240_000);

  afterAll(async () => {
    await db?.end();
    const codes = (await system?.stop()) ?? {};
    await redis?.clean();
    await database?.drop();
    // Every process shut down cleanly, except the issuer the test killed.
    for (const [name, code] of Object.entries(codes)) {
      if (name !== killedName) expect(code, name).toBe(0);
    }
  });
  let killedName = '';

  async function freeTenant(): Promise<{ auth: { authorization: string }; key: string }> {
    const n = ++tenants;
    const credentials = { email: `scale${n}@example.test`, password: 'tenant password 123' };
    const signup = await gateways[0].request('POST', '/admin/v1/auth/signup', {
      body: { ...credentials, tenant_name: `Scale ${n}` },
    });
    expect(signup.status).toBe(201);
    const login = await gateways[1].request('POST', '/admin/v1/auth/login', { body: credentials });
    const auth = { authorization: `Bearer ${login.body.token}` };
    const project = await gateways[0].request('POST', '/admin/v1/projects', {
      headers: auth,
      body: { name: 'p' },
    });
    const key = await gateways[1].request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    return { auth, key: key.body.key };
  }

  it(`never exceeds a cap of ${CAP}: ${CONCURRENT} concurrent issuances over both gateways, ${ROUNDS} rounds, exactly ${CAP} successes each`, async () => {
    const t = await freeTenant();
    const successes: number[] = [];
    const started = Date.now();
    for (let round = 0; round < ROUNDS; round++) {
      const results = await Promise.all(
        Array.from({ length: CONCURRENT }, (_, i) =>
          fetch(`${system.baseUrls[i % 2]}/api/v1/credentials`, {
            method: 'POST',
            headers: { 'x-api-key': t.key, 'content-type': 'application/json' },
            body: '{}',
          }).then(async (res) => ({
            status: res.status,
            body: (await res.json()) as { jti?: string; error?: string },
          })),
        ),
      );
      const created = results.filter((r) => r.status === 201);
      const refused = results.filter((r) => r.status === 402);
      successes.push(created.length);
      expect(created.length, `round ${round}: successes`).toBe(CAP);
      expect(refused.length, `round ${round}: refusals`).toBe(CONCURRENT - CAP);
      expect(refused[0]?.body.error).toMatch(
        /the free plan allows at most 5 concurrent connections \(max_concurrent_connections\); upgrade the plan/,
      );
      // Free the slots for the next round: revocation releases a slot at once.
      await Promise.all(
        created.map(async (c, i) => {
          const res = await (i % 2 ? gateways[1] : gateways[0]).request(
            'POST',
            `/admin/v1/credentials/${c.body.jti}/revoke`,
            {
              headers: t.auth,
            },
          );
          expect(res.status).toBe(200);
        }),
      );
    }
    console.log(
      `cap ${CAP}: ${ROUNDS} rounds of ${CONCURRENT} concurrent issuances over 2 gateways and 3 issuers in ${Date.now() - started} ms; successes per round: ${successes.join(',')}`,
    );
    expect(successes).toEqual(Array(ROUNDS).fill(CAP));
  }, 300_000);

  it('a credential revoked through one gateway is refused through the other within 1 s', async () => {
    const [a, b] = gateways;
    const took: number[] = [];
    for (let i = 0; i < 10; i++) {
      const issued = await a.request('POST', '/api/v1/credentials', {
        headers: { 'x-api-key': ownerKey },
        body: {},
      });
      expect(issued.status).toBe(201);
      const bearer = { authorization: `Bearer ${issued.body.token}` };
      expect((await b.request('GET', '/v1/relays/assignment', { headers: bearer })).status).toBe(200);
      const revoked = await a.request('POST', `/admin/v1/credentials/${issued.body.jti}/revoke`, {
        headers: ownerAuth,
      });
      expect(revoked.status).toBe(200);
      const sent = Date.now();
      await waitFor(
        async () => (await b.request('GET', '/v1/relays/assignment', { headers: bearer })).status === 401,
        1_000,
        'the other gateway to refuse the revoked credential',
        5,
      );
      took.push(Date.now() - sent);
      const refused = await b.request('GET', '/v1/relays/assignment', { headers: bearer });
      expect(refused.body).toEqual({ error: 'invalid or expired token' });
    }
    console.log(`revocation through gateway A refused by gateway B after (ms): ${took.join(', ')}`);
    expect(Math.max(...took)).toBeLessThan(1_000);
  });

  it('a scheduled rotation happens exactly once per period across 3 issuers, and every replica serves the same JWKS afterwards', async () => {
    const keys = async () =>
      (
        await db.query<{
          kid: string;
          created_at: Date;
          activated_at: Date | null;
          deactivated_at: Date | null;
        }>(
          'select kid, created_at, activated_at, deactivated_at from issuer.signing_keys order by created_at',
        )
      ).rows;
    const activeKid = async () => (await keys()).find((k) => k.activated_at && !k.deactivated_at)?.kid;
    const issuerClients = system.issuers.map((i) => connect(IssuerService, `${i.host}:${system.issuerPort}`));
    try {
      const activationsBefore = (await keys()).filter((k) => k.activated_at).length;
      const delays: number[] = [];
      for (let period = 0; period < 3; period++) {
        const before = await activeKid();
        // Time travel: the active key has signed for a whole period and the next key has been
        // published for longer than a JWKS cache lifetime, so the next tick must rotate.
        await db.query(
          `update issuer.signing_keys
             set created_at = created_at - make_interval(secs => $1),
                 activated_at = activated_at - make_interval(secs => $1)
           where deactivated_at is null`,
          [ROTATION_SECONDS + 1],
        );
        const due = Date.now();
        await waitFor(async () => (await activeKid()) !== before, 10_000, `rotation ${period + 1}`, 50);
        delays.push(Date.now() - due);
        // Several more ticks of every replica: none may rotate again within the period.
        await sleep(4 * MAINTENANCE_SECONDS * 1000);
        const after = await keys();
        const active = after.filter((k) => k.activated_at && !k.deactivated_at);
        expect(active).toHaveLength(1);
        expect(after.filter((k) => k.activated_at).length, `activations after period ${period + 1}`).toBe(
          activationsBefore + period + 1,
        );
        expect(
          after.filter((k) => !k.activated_at),
          'exactly one next key',
        ).toHaveLength(1);
      }
      console.log(
        `3 scheduled rotations over 3 issuers, each exactly once; due → rotated (ms): ${delays.join(', ')}`,
      );

      // Every replica — and both gateways — serve the same key set, the new active key first.
      const active = await activeKid();
      const converged = await waitFor(
        async () => {
          const sets = await Promise.all(issuerClients.map((c) => c.getJwks({})));
          return sets.every((s) => s.etag === sets[0]?.etag && s.keys[0]?.kid === active);
        },
        5_000,
        'every issuer to serve the new key set',
        50,
      );
      const issuerEtag = (await issuerClients[0]?.getJwks({}))?.etag;
      await waitFor(
        async () => {
          const etags = await Promise.all(
            system.baseUrls.map(async (u) => (await fetch(`${u}/v1/credentials/jwks`)).headers.get('etag')),
          );
          return etags.every((e) => e === issuerEtag);
        },
        5_000,
        'both gateways to serve the new key set',
        50,
      );
      console.log(`every issuer served the same JWKS ${converged} ms after the last check`);
    } finally {
      for (const c of issuerClients) c.close();
    }
  }, 120_000);

  it('a fourth issuer added while load runs starts receiving calls without restarting the gateways', async () => {
    const gatewayPids = system.gateways.map((g) => g.child.pid);
    let joined = 0;
    let added: IssuerReplica | undefined;
    const outcomes = await load(system.baseUrls, ownerKey, 16_000, 16, async () => {
      await sleep(3_000);
      added = await system.addIssuer();
      joined = Date.now();
    });
    // The last streams end at their next rotation (≤ 2 s) or when the gateways close them.
    await sleep(2_500);
    if (!added) throw new Error('the fourth issuer did not start');
    const shares = system.issuers.map((i) => i.issued(joined));
    const total = shares.reduce((a, b) => a + b, 0);
    console.log(
      `fourth issuer joined ${joined - (outcomes[0]?.at ?? joined)} ms into the load; statuses ${JSON.stringify(tally(outcomes))}; credentials per issuer since it joined: ${shares.join(', ')}`,
    );
    expect(tally(outcomes)).toEqual({ 201: outcomes.length });
    expect(added.issued(joined), 'credentials issued by the new replica').toBeGreaterThan(0);
    expect(added.issued(joined) / total, 'share of the new replica').toBeGreaterThan(0.1);
    expect(system.gateways.map((g) => g.child.pid)).toEqual(gatewayPids);
    expect(system.gateways.every((g) => g.child.exitCode === null)).toBe(true);
  }, 60_000);

  it('kill -9 of one issuer during a 20 s load: only 201, 402 or 503 + Retry-After, and every 201 is recorded', async () => {
    const victim = system.issuers[0] as IssuerReplica;
    killedName = victim.proc.name;
    let killedAt = 0;
    const loadStart = Date.now();
    const outcomes = await load(system.baseUrls, ownerKey, 20_000, 16, async () => {
      await sleep(6_000);
      killedAt = Date.now();
      await system.killIssuer(victim);
    });
    const byStatus = tally(outcomes);
    const before = outcomes.filter((o) => o.at < killedAt);
    const after = outcomes.filter((o) => o.at >= killedAt);
    const shares = system.issuers.map((i) => i.issued(loadStart));
    console.log(
      `kill -9 at ${killedAt - loadStart} ms of a 20 s load over 4 issuers: ${outcomes.length} requests, statuses ${JSON.stringify(byStatus)} (${before.length} before the kill, ${after.length} after); credentials per issuer (from their logs): ${shares.join(', ')}`,
    );
    for (const o of outcomes) {
      expect([201, 402, 503], o.error).toContain(o.status);
      if (o.status === 503) expect(o.retryAfter, 'Retry-After on 503').toMatch(/^\d+$/);
    }
    expect(after.filter((o) => o.status === 201).length, 'issuance went on after the kill').toBeGreaterThan(
      100,
    );

    // No credential without a record: every jti a client received is in PostgreSQL.
    const jtis = outcomes.filter((o) => o.status === 201).map((o) => o.jti as string);
    expect(new Set(jtis).size).toBe(jtis.length);
    const recorded = await db.query<{ n: number }>(
      'select count(*)::int as n from issuer.credentials where jti = any($1::text[])',
      [jtis],
    );
    expect(recorded.rows[0]?.n).toBe(jtis.length);
    // Before the kill, every replica took a real share of the load.
    for (const [i, share] of system.issuers.map((r) => r.issued(loadStart)).entries()) {
      if (system.issuers[i] === victim) continue;
      expect(share, `issuer ${i} share`).toBeGreaterThan(0);
    }
  }, 90_000);
});
