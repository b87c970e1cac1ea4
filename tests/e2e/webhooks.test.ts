/**
 * Webhooks end to end (issue 34, docs/webhooks.md): the distributed system (2 gateways, 2
 * issuers, admin and billing, each a process on the machine's PostgreSQL and Redis) delivering
 * to local receivers, every delivery verified with the `standardwebhooks` package. Two
 * simulated moq-relays drive the session events; retries are shortened to 0.5 s.
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
import { type Received, Receiver } from '@relayplane/testing/webhook-receiver';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { RelaySim } from '../support/relay-sim.ts';

const OWNER = { email: 'webhooks@example.test', password: 'webhooks owner password' };
const CAP = 2;

const ALL_EVENTS = [
  'session.started',
  'session.ended',
  'session.refused',
  'credential.revoked',
  'credentials.bulk_revoked',
  'api_key.created',
  'api_key.revoked',
  'cap.reached',
  'plan.changed',
  'signing_key.rotated',
  'signing_key.revoked',
];

interface Envelope {
  id: string;
  type: string;
  timestamp: string;
  data: Record<string, unknown> & { tenant_id: string; project_id: string | null };
}

interface Tenant {
  tenantId: string;
  auth: { authorization: string };
  projectId: string;
  key: { key: string; id: string };
}

describe('webhooks: signed, ordered, deduplicable deliveries from the distributed system', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;
  let root: { authorization: string };
  const receiver = new Receiver();
  const relays: { id: string; token: string }[] = [];
  let tenants = 0;

  const authUrl = (relay: { id: string; token: string }, gateway: number) =>
    `${(system.baseUrls[gateway] as string).replace('://', `://${relay.id}:${relay.token}@`)}/v1/relays/auth`;
  const sim = (relay: number, gateway: number) => {
    const r = relays[relay] as { id: string; token: string };
    return new RelaySim(authUrl(r, gateway), r.id);
  };

  beforeAll(async () => {
    await receiver.listen();
    database = await createTestDatabase('e2e_webhooks');
    redis = createTestRedis('e2e_webhooks');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(
      plans,
      `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP}, max_webhook_endpoints: 5, max_api_keys: 50 }\n`,
    );
    system = await startDistributed({
      label: 'webhooks',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 6).toString('base64'),
      bootstrap: OWNER,
      replicas: { gateway: 2, issuer: 2 },
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plans,
        ADMIN_SIGNUP_MAX_PER_IP: '100000',
        RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: 'true',
        RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE: '0.5,0.5,0.5,0.5,0.5',
      },
      appEnv: {
        issuer: {
          RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS: '1',
          RELAYPLANE_RELAY_SESSION_EXPIRES_SECONDS: '60',
          RELAYPLANE_WEBHOOKS_REFUSAL_WINDOW_SECONDS: '1',
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
    await receiver.close();
    await redis?.clean();
    await database?.drop();
  });

  async function freshTenant(): Promise<Tenant> {
    const n = ++tenants;
    const login = { email: `hooks${n}-${Date.now()}@example.test`, password: 'tenant password 123' };
    const signup = await api.request('POST', '/admin/v1/auth/signup', {
      body: { ...login, tenant_name: `Hooks ${n}` },
    });
    expect(signup.status).toBe(201);
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
    return {
      tenantId: signup.body.tenant.id,
      auth,
      projectId: project.body.id,
      key: { key: key.body.key, id: key.body.api_key.id },
    };
  }

  async function endpoint(t: Tenant, path: string, events: string[] = ALL_EVENTS) {
    const res = await api.request('POST', `/admin/v1/projects/${t.projectId}/webhooks`, {
      headers: t.auth,
      body: { url: receiver.url(path), events },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.secret).toMatch(/^whsec_/);
    return { id: res.body.webhook.id as string, secret: res.body.secret as string };
  }

  async function credential(t: Tenant, body: Record<string, unknown> = {}) {
    const res = await api.request('POST', '/api/v1/credentials', {
      headers: { 'x-api-key': t.key.key },
      body,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body as { token: string; jti: string };
  }

  /** Every delivery at `path`, each verified with `secret` (throws on a bad signature). */
  function verified(path: string, secret: string): (Envelope & { received: Received })[] {
    const wh = new Webhook(secret);
    return receiver.at(path).map((r) => ({
      ...(wh.verify(r.body, r.headers as Record<string, string>) as Envelope),
      received: r,
    }));
  }

  async function until(test: () => boolean, what: string, timeoutMs = 15_000) {
    await receiver.until(test, timeoutMs).catch(() => {
      throw new Error(`${what}: not within ${timeoutMs} ms`);
    });
  }

  it('delivers every event type to a local receiver, each verified with standardwebhooks, sessions in order', async () => {
    const t = await freshTenant();
    const hook = await endpoint(t, '/all');
    const types = () => new Set(verified('/all', hook.secret).map((e) => e.type));
    const a = sim(0, 0);
    const b = sim(1, 1);

    // api_key.created, then sessions: started, ended; a third parallel session over the cap is
    // refused (session.refused, counted per window) and reaches the cap (cap.reached).
    const second = await api.request('POST', `/admin/v1/projects/${t.projectId}/api-keys`, {
      headers: t.auth,
      body: {},
    });
    expect(second.status).toBe(201);
    const { token, jti } = await credential(t);
    const s1 = await a.connect(token);
    const s2 = await b.connect(token);
    expect([s1.answer.kind, s2.answer.kind]).toEqual(['granted', 'granted']);
    expect((await a.connect(token)).answer).toMatchObject({ kind: 'refused', status: 403 });
    expect((await a.end(s1.id, { sent: 1000, received: 2000 }, 3.5)).kind).toBe('granted');
    // credential.revoked (its session's next revalidation ends it: session.ended, revocation).
    expect(
      (await api.request('POST', `/admin/v1/credentials/${jti}/revoke`, { headers: t.auth })).status,
    ).toBe(200);
    expect(await b.revalidate(s2.id)).toMatchObject({ kind: 'refused', status: 403 });
    // api_key.revoked and credentials.bulk_revoked (revoking a key revokes its credentials).
    await credential({ ...t, key: { key: second.body.key, id: second.body.api_key.id } });
    expect(
      (
        await api.request('DELETE', `/admin/v1/projects/${t.projectId}/api-keys/${second.body.api_key.id}`, {
          headers: t.auth,
        })
      ).status,
    ).toBe(200);
    // plan.changed (a platform admin sets it).
    expect(
      (
        await api.request('PUT', `/admin/v1/tenants/${t.tenantId}/plan`, {
          headers: root,
          body: { plan: 'pro' },
        })
      ).status,
    ).toBe(200);

    const platformTypes = ['signing_key.rotated', 'signing_key.revoked'];
    await until(
      () => ALL_EVENTS.filter((e) => !platformTypes.includes(e)).every((e) => types().has(e)),
      `events ${ALL_EVENTS.filter((e) => !platformTypes.includes(e) && !types().has(e)).join(', ')}`,
    );
    const events = verified('/all', hook.secret);
    for (const e of events) {
      expect(e.id).toMatch(/^msg_/);
      expect(e.received.headers['webhook-id']).toBe(e.id);
      expect(e.data.tenant_id).toBe(t.tenantId);
      expect(JSON.stringify(e)).not.toContain(token);
      expect(JSON.stringify(e)).not.toContain(t.key.key);
    }
    const one = (type: string) => events.filter((e) => e.type === type);
    expect(one('api_key.created').map((e) => e.data.api_key_id)).toEqual([second.body.api_key.id]);
    expect(one('credential.revoked')[0]?.data).toMatchObject({ project_id: t.projectId, credential_id: jti });
    expect(one('api_key.revoked')[0]?.data).toMatchObject({ api_key_id: second.body.api_key.id });
    expect(one('credentials.bulk_revoked')[0]?.data).toMatchObject({
      api_key_id: second.body.api_key.id,
      revoked: 1,
    });
    expect(one('plan.changed')[0]?.data).toMatchObject({ project_id: null, from: 'free', to: 'pro' });
    expect(one('cap.reached')).toHaveLength(1);
    expect(one('cap.reached')[0]?.data).toMatchObject({
      limit: 'max_concurrent_connections',
      value: CAP,
      at: 'connect',
    });
    expect(one('session.refused')[0]?.data).toMatchObject({ refusals: { cap: 1 }, total: 1 });
    const ended = one('session.ended');
    expect(ended.find((e) => e.data.session_id === s1.id)?.data).toMatchObject({
      relay_id: relays[0]?.id,
      ended_by: 'relay',
      duration_seconds: 3.5,
      bytes_sent: 1000,
      bytes_received: 2000,
    });
    expect(ended.find((e) => e.data.session_id === s2.id)?.data).toMatchObject({
      ended_by: 'revocation',
      reason: 'revoked',
      bytes_sent: null,
    });
    // Per session: started before ended, never an ended alone.
    for (const id of [s1.id, s2.id]) {
      const order = events.filter((e) => e.data.session_id === id).map((e) => e.type);
      expect(order, id).toEqual(['session.started', 'session.ended']);
    }

    // The platform events: revoking the active signing key is signing_key.revoked, and a
    // rotation to the promoted key (every subscribed tenant hears of both). Last in this file's
    // order of use of keys: credentials signed before are refused from here on.
    const keys = await api.request('GET', '/admin/v1/signing-keys?limit=200', { headers: root });
    const active = keys.body.keys.find((k: { state: string }) => k.state === 'active');
    const revoked = await api.request('POST', `/admin/v1/signing-keys/${active.kid}/revoke`, {
      headers: root,
    });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    await until(() => platformTypes.every((e) => types().has(e)), 'signing key events');
    const platform = verified('/all', hook.secret).filter((e) => platformTypes.includes(e.type));
    expect(platform.find((e) => e.type === 'signing_key.revoked')?.data).toMatchObject({
      tenant_id: t.tenantId,
      project_id: null,
      kid: active.kid,
    });
    expect(platform.find((e) => e.type === 'signing_key.rotated')?.data.previous_kid).toBe(active.kid);
  });

  it('retries a receiver answering 500 three times with the same webhook-id, in order, then the next event of the subject', async () => {
    const t = await freshTenant();
    const hook = await endpoint(t, '/flaky', ['session.started', 'session.ended']);
    receiver.answer('/flaky', 500, 500, 500);
    const a = sim(0, 1);
    const { token } = await credential(t);
    const s = await a.connect(token);
    expect(s.answer.kind).toBe('granted');
    expect((await a.end(s.id)).kind).toBe('granted');
    await until(() => receiver.at('/flaky').length >= 5, 'five attempts');
    const got = verified('/flaky', hook.secret);
    expect(got.map((e) => e.type)).toEqual([
      'session.started',
      'session.started',
      'session.started',
      'session.started',
      'session.ended',
    ]);
    expect(new Set(got.slice(0, 4).map((e) => e.received.headers['webhook-id'])).size).toBe(1);
    // The retries: 0.5 s apart (±20 %), after the first attempt.
    const gaps = got
      .slice(1, 4)
      .map((e, i) => e.received.at - (got[i] as { received: Received }).received.at);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(350);
    const log = await api.request('GET', `/admin/v1/projects/${t.projectId}/webhooks/${hook.id}/deliveries`, {
      headers: t.auth,
    });
    expect(log.status).toBe(200);
    const started = log.body.deliveries.find(
      (d: { event_type: string }) => d.event_type === 'session.started',
    );
    expect(started).toMatchObject({ status: 'succeeded', attempts: 4, response_status: 200 });
  });

  it('loses nothing when the issuer holding the outbox is killed -9 between the commit and the send', async () => {
    const t = await freshTenant();
    const hook = await endpoint(t, '/crash', ['session.started']);
    const admin = system.procs.find((p) => p.name === 'webhooks-admin');
    if (!admin) throw new Error(`no admin among ${system.procs.map((p) => p.name).join(', ')}`);
    const { token } = await credential(t);
    // Admin paused: the outboxes keep the rows (RecordAuditEvents does not answer).
    admin.child.kill('SIGSTOP');
    let resumed = false;
    try {
      // A relay's connect needs the issuer and billing only: the notice commits with the session.
      const s = await sim(1, 0).connect(token);
      expect(s.answer.kind).toBe('granted');
      // The notice committed with the session and waits in the outbox: admin cannot take it.
      const db = new pg.Client({ connectionString: database.url });
      await db.connect();
      try {
        const waiting = await db.query(
          "select count(*)::int as n from issuer.audit_outbox where action = 'session.started' and target_id = $1",
          [s.id],
        );
        expect(waiting.rows[0]?.n).toBe(1);
      } finally {
        await db.end();
      }
      for (const issuer of system.procs.filter((p) => p.name.startsWith('webhooks-issuer-')))
        issuer.child.kill('SIGKILL');
      admin.child.kill('SIGCONT');
      resumed = true;
      for (const issuer of system.procs.filter((p) => p.name.startsWith('webhooks-issuer-')))
        await system.restart(issuer);
      await until(() => receiver.at('/crash').length >= 1, 'session.started after the crash', 30_000);
      const [event] = verified('/crash', hook.secret);
      expect(event).toMatchObject({ type: 'session.started', data: { session_id: s.id } });
    } finally {
      if (!resumed) admin.child.kill('SIGCONT');
    }
  }, 90_000);

  it("keeps a healthy endpoint's latency while another endpoint hangs (measured)", async () => {
    const t = await freshTenant();
    const healthy = await endpoint(t, '/fast', ['api_key.created']);
    /** Change → arrival at /fast of `n` API key creations, sorted. */
    const measure = async (n: number) => {
      const latencies: number[] = [];
      for (let i = 0; i < n; i++) {
        const before = receiver.at('/fast').length;
        const sent = Date.now();
        const res = await api.request('POST', `/admin/v1/projects/${t.projectId}/api-keys`, {
          headers: t.auth,
          body: {},
        });
        expect(res.status).toBe(201);
        await until(() => receiver.at('/fast').length > before, `fast delivery ${i}`);
        latencies.push((receiver.at('/fast')[before] as Received).at - sent);
      }
      return latencies.sort((x, y) => x - y);
    };
    const alone = await measure(5);
    await endpoint(t, '/hang', ['api_key.created']);
    receiver.answer('/hang', ...Array(50).fill('hang'));
    const latencies = await measure(10);
    const p50 = latencies[Math.floor(latencies.length / 2)] as number;
    const max = latencies.at(-1) as number;
    console.log(
      `webhooks: healthy endpoint change→delivery alone p50 ${alone[2]} ms (max ${alone.at(-1)} ms); ` +
        `beside one that hangs (10 s timeouts) p50 ${p50} ms, max ${max} ms`,
    );
    expect(verified('/fast', healthy.secret)).toHaveLength(15);
    expect(max).toBeLessThan(2_000);
    expect(receiver.at('/hang').length).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('refuses endpoint URLs that are not https or name private, loopback-less or link-local addresses', async () => {
    const t = await freshTenant();
    for (const url of [
      'ftp://hooks.example.com/x',
      'https://10.1.2.3/hook',
      'https://192.168.1.10/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[fd00::1]/hook',
      'http://203.0.113.10/hook',
    ]) {
      const res = await api.request('POST', `/admin/v1/projects/${t.projectId}/webhooks`, {
        headers: t.auth,
        body: { url, events: ['api_key.created'] },
      });
      expect(res.status, url).toBe(400);
      expect(res.body.error, url).toMatch(/^url: /);
    }
  });

  it('signs with both secrets during a rotation’s grace period', async () => {
    const t = await freshTenant();
    const hook = await endpoint(t, '/rotate', ['api_key.created']);
    const rotated = await api.request(
      'POST',
      `/admin/v1/projects/${t.projectId}/webhooks/${hook.id}/rotate-secret`,
      {
        headers: t.auth,
        body: { grace_seconds: 600 },
      },
    );
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    expect(rotated.body.secret).not.toBe(hook.secret);
    await api.request('POST', `/admin/v1/projects/${t.projectId}/api-keys`, { headers: t.auth, body: {} });
    await until(() => receiver.at('/rotate').length >= 1, 'a delivery after the rotation');
    expect(verified('/rotate', hook.secret)[0]?.type).toBe('api_key.created');
    expect(verified('/rotate', rotated.body.secret)[0]?.type).toBe('api_key.created');
    // The secret never shows again.
    const got = await api.request('GET', `/admin/v1/projects/${t.projectId}/webhooks/${hook.id}`, {
      headers: t.auth,
    });
    expect(JSON.stringify(got.body)).not.toContain('whsec_');
  });
});
