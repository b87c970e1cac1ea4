/**
 * A rolling restart under load (issue 16, item 4): two gateways, three issuers, and two
 * replicas each of admin and billing (as the chart deploys them: a one-replica service has
 * nothing to take its calls while it restarts), as processes on PostgreSQL and Redis. While a
 * steady issuance load runs, every process is stopped with SIGTERM in turn, as a Kubernetes
 * rollout does: each issuer, then each admin, each billing, each gateway, the next only once
 * the previous one is back and ready (tests/support/distributed.ts, `restart`).
 *
 * The client (load-client.ts) closes a connection idle for 5 s, far below the gateway's
 * keep-alive timeout (72 s), as a load balancer in front of the gateway must: with `fetch`,
 * whose idle connections last until 2 s before the server's timeout, about one request in
 * 50,000 was lost unanswered, most likely sent on a connection the gateway was closing for
 * idleness.
 *
 * The load is open loop: requests fall due at a fixed rate whatever the answers take, so a
 * stall shows up as requests piling up rather than as a quieter load. They go round-robin to
 * the gateways in the rotation. A gateway being restarted is out of the rotation from its
 * SIGTERM until its /readyz answers 200 again: in Kubernetes its readiness takes it out of the
 * Service, so the load goes only to the other one meanwhile. Requests already on their way to
 * it when SIGTERM comes are answered: it goes on serving for GATEWAY_SHUTDOWN_DELAY_MS, as the
 * chart deploys it (without it, once in four CI runs two requests met its closing listener: a
 * 503 without Retry-After from Fastify, and a reset). A request whose connection is refused
 * (nothing was sent) goes to the other gateway, as a client behind a load balancer would have it.
 *
 * Asserted: clients see only 201, or 503 with Retry-After, and 503 is rare while the issuers
 * restart; every 201's jti is recorded in PostgreSQL; a second tenant, at its cap from the
 * start, gets only 402 (or 503) throughout and still holds exactly its cap of live credentials
 * at the end; every process exits 0 on SIGTERM within its grace period (none needed SIGKILL).
 * One line of counts per phase goes to the log.
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
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, type Restarted, startDistributed } from '../support/distributed.ts';
import { createLoadClient, IDLE_MS } from './load-client.ts';

const OWNER = { email: 'rollout@example.test', password: 'rolling restart password' };
/** Issuance requests per second of the load (the bootstrap tenant's enterprise plan takes them all). */
const RATE = 250;
/** Requests per second of the tenant at its cap. */
const CAPPED_RATE = 10;
const CAP = 5;
/** Load before the first SIGTERM and after the last process is back. */
const STEADY_MS = 3_000;
/** The chart's terminationGracePeriodSeconds: after it, the kubelet sends SIGKILL. */
const GRACE_MS = 30_000;

type Tenant = 'load' | 'capped';

interface Outcome {
  tenant: Tenant;
  /** What was being restarted when the request fell due. */
  phase: string;
  /** The gateway that answered (or failed), by index. */
  gateway: number;
  /** When the answer (or the failure) came, in ms since the load started. */
  at: number;
  status: number;
  retryAfter: string | null;
  jti?: string;
  error?: string;
}

/**
 * The open-loop client: `rates` requests per second per tenant, round-robin over the gateways
 * in the rotation; a refused connection is sent once more, to the next gateway.
 */
function startLoad(baseUrls: string[], keys: Record<Tenant, string>, rates: Record<Tenant, number>) {
  const http = createLoadClient();
  const rotation = baseUrls.map(() => true);
  const outcomes: Outcome[] = [];
  const inFlight = new Set<Promise<void>>();
  const startedAt = performance.now();
  const sent: Record<Tenant, number> = { load: 0, capped: 0 };
  let next = 0;
  const client = {
    /** What is being restarted: the requests falling due now are counted under it. */
    phase: 'steady',
    /** Requests whose connection was refused, sent to the other gateway. */
    failovers: 0,
    /** Out of the rotation (its readiness failed) / back in. */
    leave(gateway: number) {
      rotation[gateway] = false;
    },
    join(gateway: number) {
      rotation[gateway] = true;
    },
    /** Connections opened and reused (load-client.ts). */
    connections: http.stats,
    /** No more requests; resolves with every outcome once the last answer is in. */
    async stop(): Promise<Outcome[]> {
      clearInterval(timer);
      await Promise.all(inFlight);
      http.close();
      return outcomes;
    },
  };

  const pick = (): number => {
    for (let i = 0; i < baseUrls.length; i++) {
      const g = next++ % baseUrls.length;
      if (rotation[g]) return g;
    }
    throw new Error('no gateway in the rotation');
  };
  const send = async (tenant: Tenant, phase: string) => {
    let gateway = pick();
    const record = (answer: Pick<Outcome, 'status' | 'retryAfter' | 'jti' | 'error'>) =>
      outcomes.push({ tenant, phase, gateway, at: Math.round(performance.now() - startedAt), ...answer });
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await http.post(
          `${baseUrls[gateway]}/api/v1/credentials`,
          { 'x-api-key': keys[tenant], 'content-type': 'application/json' },
          tenant === 'load' ? '{"ttl_seconds":60}' : '{}',
        );
        let body: { jti?: string; error?: string } = {};
        try {
          body = JSON.parse(res.text);
        } catch {
          // Not JSON: the status and headers say enough.
        }
        const retryAfter = res.headers['retry-after'];
        record({
          status: res.status,
          retryAfter: typeof retryAfter === 'string' ? retryAfter : null,
          jti: body.jti,
          error: body.error,
        });
        return;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // Refused: nothing was sent, so it can go elsewhere. Anything else may have been worked on.
        if (code === 'ECONNREFUSED' && attempt === 0) {
          client.failovers++;
          gateway = pick();
          continue;
        }
        record({ status: 0, retryAfter: null, error: `${code ?? ''} ${String(err)}`.trim() });
        return;
      }
    }
  };
  // Every few milliseconds, whatever fell due since: the rate holds however long answers take.
  const timer = setInterval(() => {
    const elapsed = performance.now() - startedAt;
    for (const tenant of ['load', 'capped'] as const) {
      const due = Math.floor((elapsed * rates[tenant]) / 1000);
      for (; sent[tenant] < due; sent[tenant]++) {
        const p = send(tenant, client.phase);
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p));
      }
    }
  }, 5);

  return client;
}

/** Lets the load run for `ms`. */
const loadFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `201 n, 503 n, …` of some outcomes, statuses in order (0: the request failed). */
function counts(outcomes: Outcome[]): Record<string, number> {
  const byStatus: Record<string, number> = {};
  for (const o of [...outcomes].sort((a, b) => a.status - b.status)) {
    byStatus[o.status] = (byStatus[o.status] ?? 0) + 1;
  }
  return byStatus;
}

/** Whether the answer is one a client may see during a restart: `expected`, or 503 with Retry-After. */
function allowed(o: Outcome, expected: number): boolean {
  return o.status === expected || (o.status === 503 && /^\d+$/.test(o.retryAfter ?? ''));
}

describe('a rolling restart of every process under a steady issuance load', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let db: pg.Client;
  let keys: Record<Tenant, string>;
  let cappedJtis: string[];

  beforeAll(async () => {
    database = await createTestDatabase('e2e_rolling');
    redis = createTestRedis('e2e_rolling');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(plans, `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP} }\n`);
    system = await startDistributed({
      label: 'rolling',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 11).toString('base64'),
      bootstrap: OWNER,
      replicas: { gateway: 2, issuer: 3, admin: 2, billing: 2 },
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plans,
        // The capped tenant's credentials never connect to a relay: held for their whole TTL
        // (600 s) rather than the default connect window (60 s), which this run outlasts.
        RELAYPLANE_RELAY_CONNECT_WINDOW_SECONDS: '600',
        // As the chart deploys it (5 s there): a gateway answers what is already on its way for
        // a while after SIGTERM. Here the load leaves it at SIGTERM, so 2 s covers the requests
        // in flight on this loaded machine.
        GATEWAY_SHUTDOWN_DELAY_MS: '2000',
      },
    });
    db = new pg.Client({ connectionString: database.url });
    await db.connect();
    const [a, b] = (await Promise.all(system.baseUrls.map((u) => Api.connect(u)))) as [Api, Api];

    /** A project and an API key of the tenant `auth` belongs to. */
    const apiKey = async (auth: { authorization: string }) => {
      const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
      const key = await b.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
        headers: auth,
        body: { scopes: ['relay:session'] },
      });
      expect(key.status).toBe(201);
      return key.body.key as string;
    };
    // The load: the bootstrap tenant (enterprise plan, cap 100 000).
    const owner = await a.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const load = await apiKey({ authorization: `Bearer ${owner.body.token}` });
    // The tenant at its cap: a free plan (cap 5) filled before the load starts.
    const tenant = { email: 'capped@example.test', password: 'tenant password 123' };
    expect(
      (await a.request('POST', '/admin/v1/auth/signup', { body: { ...tenant, tenant_name: 'Capped' } }))
        .status,
    ).toBe(201);
    const login = await b.request('POST', '/admin/v1/auth/login', { body: tenant });
    const capped = await apiKey({ authorization: `Bearer ${login.body.token}` });
    cappedJtis = [];
    for (let i = 0; i < CAP; i++) {
      const res = await (i % 2 ? b : a).request('POST', '/api/v1/credentials', {
        headers: { 'x-api-key': capped },
        body: { ttl_seconds: 600 },
      });
      expect(res.status).toBe(201);
      cappedJtis.push(res.body.jti);
    }
    expect(
      (await a.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': capped }, body: {} })).status,
    ).toBe(402);
    keys = { load, capped };
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  it('each issuer, admin, billing, then each gateway: only 201 or 503 + Retry-After, every 201 recorded, the cap held, every exit clean', async () => {
    // As a rollout of the chart's Deployments goes: each one's pods in turn.
    const order = [
      ...['issuer-0', 'issuer-1', 'issuer-2'],
      ...['admin-0', 'admin-1'],
      ...['billing-0', 'billing-1'],
      ...['gateway-0', 'gateway-1'],
    ];

    const load = startLoad(system.baseUrls, keys, { load: RATE, capped: CAPPED_RATE });
    const restarts: (Restarted & { name: string })[] = [];
    const started = Date.now();
    let outcomes: Outcome[] = [];
    try {
      await loadFor(STEADY_MS);
      for (const name of order) {
        const proc = system.procs.find((p) => p.name === `rolling-${name}`);
        if (!proc) throw new Error(`no process rolling-${name}`);
        const gateway = /^gateway-(\d+)$/.exec(name)?.[1];
        load.phase = name;
        if (gateway !== undefined) load.leave(Number(gateway));
        const restarted = await system.restart(proc);
        if (gateway !== undefined) load.join(Number(gateway));
        restarts.push({ name, ...restarted });
      }
      load.phase = 'after';
      await loadFor(STEADY_MS);
    } finally {
      outcomes = await load.stop();
    }
    const took = Date.now() - started;

    // The counts, per phase (the load's and the capped tenant's requests apart).
    const main = outcomes.filter((o) => o.tenant === 'load');
    const capped = outcomes.filter((o) => o.tenant === 'capped');
    const byPhase = ['steady', ...restarts.map((r) => r.name), 'after'].map((phase) => {
      const of = main.filter((o) => o.phase === phase);
      const restart = restarts.find((r) => r.name === phase);
      const timing = restart ? ` (stop ${restart.stopMs} ms, ready ${restart.startMs} ms later)` : '';
      return `${phase}${timing}: ${of.length} requests ${JSON.stringify(counts(of))}`;
    });
    const unavailable = main.filter((o) => o.status === 503).length;
    const others = main.filter((o) => o.status !== 201 && o.status !== 503).length;
    console.log(
      `rolling restart of ${restarts.length} processes in ${took} ms under ${RATE} issuances/s (2 gateways, 3 issuers, 2 admin, 2 billing): ` +
        `${main.length} requests, 201 ${main.length - unavailable - others}, 503 ${unavailable} ` +
        `(${((100 * unavailable) / Math.max(1, main.length)).toFixed(2)} %), others ${others}; ` +
        `refused connections sent to the other gateway: ${load.failovers}; ` +
        `capped tenant: ${capped.length} requests ${JSON.stringify(counts(capped))}; per phase: ${byPhase.join('; ')}`,
    );
    const c = load.connections;
    console.log(
      `client connections: ${c.fresh} requests on a new connection, ${c.reused} on a reused one, ` +
        `the longest idle before its reuse ${c.maxIdleMs} ms (idle ones close after ${IDLE_MS} ms; the gateway's after 72 s)`,
    );

    // Clients saw only 201 (402 for the capped tenant) or 503 with Retry-After.
    const wrong = [...main.filter((o) => !allowed(o, 201)), ...capped.filter((o) => !allowed(o, 402))];
    expect(wrong.slice(0, 5), `answers other than 201/402 or 503 + Retry-After (${wrong.length})`).toEqual(
      [],
    );
    // While an issuer restarts, 503 is rare: a request whose issuance stream broke (its issuer
    // stopping) is sent again on another stream, so only one that fails twice answers 503
    // (measured: none of about 21 000 over three runs). While admin or billing restarts, the
    // 503s counted are the gateways' channels to the replica restarted just before: they are
    // still in gRPC's reconnect backoff when its sibling stops (reported, not bounded here).
    const duringIssuers = main.filter((o) => o.phase.startsWith('issuer-'));
    expect(
      duringIssuers.filter((o) => o.status === 503).length / duringIssuers.length,
      'share of 503 while the issuers restart',
    ).toBeLessThan(0.01);
    // Issuance went on through every phase.
    for (const phase of ['steady', ...restarts.map((r) => r.name), 'after']) {
      expect(
        main.filter((o) => o.phase === phase && o.status === 201).length,
        `credentials issued while ${phase}`,
      ).toBeGreaterThan(0);
    }

    // No credential without a record: every jti a client received is in PostgreSQL.
    const jtis = main.filter((o) => o.status === 201).map((o) => o.jti as string);
    expect(new Set(jtis).size).toBe(jtis.length);
    const recorded = await db.query<{ n: number }>(
      'select count(*)::int as n from issuer.credentials where jti = any($1::text[])',
      [jtis],
    );
    expect(recorded.rows[0]?.n, 'credentials answered 201 and recorded').toBe(jtis.length);

    // The cap held: the capped tenant was refused throughout and holds exactly its cap.
    expect(capped.filter((o) => o.status === 402).length).toBeGreaterThan(0);
    const live = await db.query<{ jti: string }>(
      `select jti from issuer.credentials
        where tenant_id = (select tenant_id from issuer.credentials where jti = $1)
          and revoked_at is null and expires_at > now()
        order by jti`,
      [cappedJtis[0]],
    );
    expect(live.rows.map((r) => r.jti)).toEqual([...cappedJtis].sort());

    // Every process stopped on SIGTERM by itself, within its grace period.
    for (const r of restarts) {
      expect(r.code, `${r.name} exit code`).toBe(0);
      expect(r.stopMs, `${r.name} shutdown time`).toBeLessThan(GRACE_MS);
    }
    // Up to 9 restarts of ~1–13 s each under load; on a busy 2-core machine they took over 3 min.
  }, 360_000);
});
