/**
 * Relay sessions end to end (docs/credentials.md, "Sessions"): the distributed system (2
 * gateways, every app a process on the machine's PostgreSQL and Redis) as the auth server of two
 * simulated moq-relays, each configured with `--auth-url http://<relay_id>:<token>@<gateway>/v1/relays/auth`
 * and speaking exactly the session contract (tests/support/relay-sim.ts). Cadence 1 s; the free
 * plan capped at 4 concurrent connections.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as moqToken from '@moq/token';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { RelaySim } from '../support/relay-sim.ts';

const OWNER = { email: 'relay-sessions@example.test', password: 'relay sessions password' };
const CAP = 4;
const CADENCE_S = 1;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Tenant {
  auth: { authorization: string };
  projectId: string;
  key: { key: string; id: string };
}

describe('relay sessions: Relayplane as the auth server of moq-relays', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;
  let root: { authorization: string };
  const relays: { id: string; token: string }[] = [];
  let tenants = 0;

  const authUrl = (relay: { id: string; token: string }, gateway: number) =>
    `${(system.baseUrls[gateway] as string).replace('://', `://${relay.id}:${relay.token}@`)}/v1/relays/auth`;
  const sim = (relay: number, gateway: number) => {
    const r = relays[relay] as { id: string; token: string };
    return new RelaySim(authUrl(r, gateway), r.id);
  };

  beforeAll(async () => {
    database = await createTestDatabase('e2e_relay_sessions');
    redis = createTestRedis('e2e_relay_sessions');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(plans, `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP} }\n`);
    system = await startDistributed({
      label: 'relay-sessions',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 5).toString('base64'),
      bootstrap: OWNER,
      replicas: { gateway: 2 },
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plans,
        ADMIN_SIGNUP_MAX_PER_IP: '100000',
        // The usage job aggregates yesterday and today every second.
        BILLING_USAGE_INTERVAL_MS: '1000',
      },
      appEnv: {
        issuer: {
          RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS: String(CADENCE_S),
          RELAYPLANE_RELAY_SESSION_EXPIRES_SECONDS: '60',
        },
      },
    });
    api = await Api.connect(system.baseUrl);
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
    root = { authorization: `Bearer ${login.body.token}` };
    for (const host of ['relay-a.example', 'relay-b.example']) {
      const res = await api.request('POST', '/admin/v1/relays', {
        headers: root,
        body: { region: 'eu-west', host, port: 4433 },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      relays.push({ id: res.body.relay.id, token: res.body.token });
    }
  }, 180_000);

  afterAll(async () => {
    await system?.stop();
    await redis?.clean();
    await database?.drop();
  });

  /** A tenant of its own on the free plan (its cap is this test's alone), with a project and a key. */
  async function freshTenant(): Promise<Tenant> {
    const n = ++tenants;
    const login = { email: `relay${n}-${Date.now()}@example.test`, password: 'tenant password 123' };
    expect(
      (await api.request('POST', '/admin/v1/auth/signup', { body: { ...login, tenant_name: `Relay ${n}` } }))
        .status,
    ).toBe(201);
    const session = await api.request('POST', '/admin/v1/auth/login', { body: login });
    const auth = { authorization: `Bearer ${session.body.token}` };
    const project = await api.request('POST', '/admin/v1/projects', {
      headers: auth,
      body: { name: 'live' },
    });
    expect(project.status).toBe(201);
    const key = await api.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: {},
    });
    expect(key.status).toBe(201);
    return { auth, projectId: project.body.id, key: { key: key.body.key, id: key.body.api_key.id } };
  }

  async function credential(
    t: Tenant,
    key = t.key.key,
    body: Record<string, unknown> = {},
  ): Promise<{ token: string; jti: string }> {
    const res = await api.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body;
  }

  it(`admits ${CAP} sessions across 2 relays and 2 gateways, refuses the next, and admits it once one ends`, async () => {
    const t = await freshTenant();
    const a = sim(0, 0);
    const b = sim(1, 1);
    const { token } = await credential(t);
    const admitted: { relay: RelaySim; id: string }[] = [];
    for (let i = 0; i < CAP; i++) {
      const relay = i % 2 === 0 ? a : b;
      const { id, answer } = await relay.connect(token);
      expect(answer.kind, JSON.stringify(answer)).toBe('granted');
      admitted.push({ relay, id });
    }
    const over = await b.connect(token);
    expect(over.answer).toMatchObject({ kind: 'refused', status: 403 });
    expect(over.answer.kind === 'refused' && over.answer.reason).toMatch(new RegExp(`${CAP}`));
    const first = admitted[0] as { relay: RelaySim; id: string };
    expect((await first.relay.end(first.id, { sent: 100, received: 200 }, 2.5)).kind).toBe('granted');
    expect((await b.connect(token)).answer.kind).toBe('granted');
    const listed = await api.request('GET', `/admin/v1/projects/${t.projectId}/sessions?state=ended`, {
      headers: t.auth,
    });
    expect(listed.status).toBe(200);
    expect(listed.body.sessions).toEqual([
      expect.objectContaining({ id: first.id, duration_seconds: 2.5, bytes: { sent: 100, received: 200 } }),
    ]);
  });

  it('answers a duplicate connect id with the same grant and one session; another node name is 403', async () => {
    const t = await freshTenant();
    const a = sim(0, 0);
    const { token } = await credential(t);
    const first = await a.connect(token, '/room/1');
    expect(first.answer.kind).toBe('granted');
    const again = await sim(0, 1).connect(token, '/room/1', first.id);
    expect(again.answer).toEqual(first.answer);
    const live = await api.request('GET', `/admin/v1/projects/${t.projectId}/sessions?state=live`, {
      headers: t.auth,
    });
    expect(live.body.sessions.map((s: { id: string }) => s.id)).toEqual([first.id]);
    const impostor = await a.raw({
      id: 'beef',
      event: 'connect',
      node: (relays[1] as { id: string }).id,
      transport: 'quic',
      path: '/',
      query: `jwt=${token}`,
    });
    expect(impostor).toMatchObject({ kind: 'refused', status: 403 });
  });

  it(`frees the slots of a relay killed without end within 2 × cadence (${2 * CADENCE_S} s)`, async () => {
    const t = await freshTenant();
    const a = sim(0, 0);
    const b = sim(1, 1);
    const { token } = await credential(t);
    for (let i = 0; i < CAP; i++) expect((await a.connect(token)).answer.kind).toBe('granted');
    expect((await b.connect(token)).answer.kind).toBe('refused');
    a.die();
    const died = Date.now();
    let admittedAfterMs: number | undefined;
    while (Date.now() - died < 2 * CADENCE_S * 1000 + 2_000) {
      if ((await b.connect(token)).answer.kind === 'granted') {
        admittedAfterMs = Date.now() - died;
        break;
      }
      await sleep(100);
    }
    console.log(
      `relay killed without end: a slot was free again after ${admittedAfterMs} ms (bound ${2 * CADENCE_S * 1000} ms)`,
    );
    expect(admittedAfterMs).toBeDefined();
    expect(admittedAfterMs as number).toBeLessThanOrEqual(2 * CADENCE_S * 1000 + 500);
  });

  it('refuses the next revalidate once the credential, its API key or the session is revoked', async () => {
    const t = await freshTenant();
    const a = sim(0, 0);
    const byJti = await credential(t);
    const second = await api.request('POST', `/admin/v1/projects/${t.projectId}/api-keys`, {
      headers: t.auth,
      body: {},
    });
    const byKey = await credential(t, second.body.key);
    const bySession = await credential(t);
    const s1 = (await a.connect(byJti.token)).id;
    const s2 = (await a.connect(byKey.token)).id;
    const s3 = (await a.connect(bySession.token)).id;
    for (const id of [s1, s2, s3]) expect((await a.revalidate(id)).kind).toBe('granted');

    expect(
      (await api.request('POST', `/admin/v1/credentials/${byJti.jti}/revoke`, { headers: t.auth })).status,
    ).toBe(200);
    const keyGone = await api.request(
      'DELETE',
      `/admin/v1/projects/${t.projectId}/api-keys/${second.body.api_key.id}`,
      { headers: t.auth },
    );
    expect(keyGone.status).toBe(200);
    expect((await api.request('POST', `/admin/v1/sessions/${s3}/end`, { headers: t.auth })).status).toBe(200);

    for (const id of [s1, s2, s3]) {
      expect(await a.revalidate(id), id).toMatchObject({ kind: 'refused', status: 403 });
      expect(a.sessions.get(id)?.ended).toBe('refused');
    }
  });

  it('answers an outage per the contract (the grant stands until expires), then the sessions resume', async () => {
    const t = await freshTenant();
    const a = sim(0, 0);
    const { token } = await credential(t);
    const { id, answer } = await a.connect(token);
    expect(answer.kind).toBe('granted');
    const gateway = system.procs.find((p) => p.name === 'relay-sessions-gateway-0');
    if (!gateway) throw new Error(`no gateway-0 among ${system.procs.map((p) => p.name).join(', ')}`);
    const restarting = system.restart(gateway);
    let outage: string | undefined;
    for (let i = 0; i < 200 && !outage; i++) {
      const seen = await a.revalidate(id);
      if (seen.kind === 'outage') outage = seen.detail;
      else expect(seen.kind).toBe('granted');
      await sleep(25);
    }
    expect(outage, 'the relay saw the gateway away').toBeDefined();
    // The grant stands: the session is not ended by an outage.
    expect(a.sessions.get(id)?.ended).toBeUndefined();
    await restarting;
    expect(await a.revalidate(id)).toMatchObject({ kind: 'granted' });
  });

  it("verifies a path-scoped credential with @moq/token and the .jwk endpoint's key; the relay is granted its patterns", async () => {
    const t = await freshTenant();
    const { token } = await credential(t, t.key.key, {
      root: 'stage/1',
      publish: ['host/**'],
      subscribe: ['**'],
    });
    const kid = JSON.parse(Buffer.from(token.split('.')[0] as string, 'base64url').toString()).kid as string;
    // What moq-relay's --auth-key-dir <base URL> fetches, over HTTP from each gateway.
    for (const base of system.baseUrls) {
      const jwk = await fetch(`${base}/v1/credentials/jwks/${kid}.jwk`);
      expect(jwk.status).toBe(200);
      const key = moqToken.loadPublic(await jwk.text());
      const claims = await moqToken.verify(key, token, `${t.projectId}/stage/1`);
      expect(claims).toMatchObject({ root: `${t.projectId}/stage/1`, put: ['host'], get: [''] });
    }
    const a = sim(0, 1);
    const host = await a.connect(token, '/stage/1/host');
    expect(host.answer).toMatchObject({
      kind: 'granted',
      grant: { root: `${t.projectId}/stage/1/host`, publish: ['**'], subscribe: ['**'] },
    });
    const guest = await a.connect(token, '/stage/1/guest');
    expect(guest.answer).toMatchObject({ kind: 'granted', grant: { subscribe: ['**'] } });
    expect(guest.answer.kind === 'granted' && guest.answer.grant.publish).toBeUndefined();
    expect((await a.connect(token, '/stage/2')).answer).toMatchObject({ kind: 'refused', status: 403 });
  });

  it('shows the minutes and bytes of the sessions the relays ended in the daily usage', async () => {
    const t = await freshTenant();
    const a = sim(0, 0);
    const b = sim(1, 1);
    const first = await a.connect((await credential(t)).token);
    const second = await b.connect((await credential(t)).token);
    expect([first.answer.kind, second.answer.kind]).toEqual(['granted', 'granted']);
    expect(await a.end(first.id, { sent: 3_000_000, received: 1_000 }, 90)).toMatchObject({
      kind: 'granted',
    });
    expect(await b.end(second.id, { sent: 500, received: 7 }, 30)).toMatchObject({ kind: 'granted' });
    const today = new Date().toISOString().slice(0, 10);
    const expected = { sessions_ended: 2, session_minutes: 2, bytes_sent: 3_000_500, bytes_received: 1_007 };
    const deadline = Date.now() + 30_000;
    let days: { project_id: string | null }[] = [];
    for (;;) {
      const res = await api.request('GET', `/admin/v1/billing/usage?from=${today}&to=${today}`, {
        headers: t.auth,
      });
      expect(res.status).toBe(200);
      days = res.body.days;
      const done = days.filter((d) => (d as unknown as { sessions_ended: number }).sessions_ended === 2);
      if (done.length === 2 || Date.now() > deadline) break;
      await sleep(250);
    }
    expect(days.find((d) => d.project_id === null)).toMatchObject(expected);
    expect(days.find((d) => d.project_id === t.projectId)).toMatchObject(expected);
  });
});
