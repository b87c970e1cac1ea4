/**
 * Audit events of issuer and billing, end to end (issue 17 item 1; docs/audit.md, "Events from
 * issuer and billing"): billing, admin, two issuers and a gateway as separate processes on
 * PostgreSQL and Redis. A change made through the gateway commits with its outbox row in the
 * issuer's or billing's schema; the outboxes deliver to admin, and the event is listed by
 * GET /admin/v1/audit-events within 2 s — exactly once, although two issuers deliver.
 */
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';

const OWNER = { email: 'root@example.test', password: 'audit outbox password' };

interface Event {
  id: string;
  occurred_at: string;
  tenant_id: string | null;
  actor: { type: string; id: string };
  action: string;
  target: { type: string; id: string };
  outcome: string;
  ip: string | null;
  user_agent: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

describe('audit events from issuer and billing, through their outboxes into admin', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;
  let root: { authorization: string };
  let rootUserId: string;
  let tenants = 0;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_audit_outbox');
    redis = createTestRedis('e2e_audit_outbox');
    system = await startDistributed({
      label: 'audit-outbox',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 7).toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 2 },
      // The checkout below confirms enterprise through the built-in provider.
      extraEnv: { BILLING_BUILTIN_PAID_CHECKOUT: 'true' },
    });
    api = await Api.connect(system.baseUrl);
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    root = { authorization: `Bearer ${login.body.token}` };
    rootUserId = (await api.request('GET', '/admin/v1/auth/session', { headers: root })).body.user.id;
  }, 180_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  /** A signed-up tenant (its owner logged in) with a project and an API key. */
  async function tenant() {
    const n = ++tenants;
    const login = { email: `audit${n}@example.test`, password: 'tenant password 123' };
    const signup = await api.request('POST', '/admin/v1/auth/signup', {
      body: { ...login, tenant_name: `A${n}` },
    });
    expect(signup.status).toBe(201);
    const session = await api.request('POST', '/admin/v1/auth/login', { body: login });
    const auth = { authorization: `Bearer ${session.body.token}` };
    const me = (await api.request('GET', '/admin/v1/auth/session', { headers: auth })).body;
    const project = await api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    const key = await api.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    return {
      auth,
      userId: me.user.id as string,
      tenantId: me.tenant.id as string,
      apiKey: key.body.key as string,
    };
  }

  /** Events of `action` the caller lists (`query` adds filters), once `count` are there; fails after 2 s. */
  async function listed(
    auth: { authorization: string },
    action: string,
    count: number,
    query = '',
  ): Promise<Event[]> {
    let events: Event[] = [];
    const took = await waitFor(
      async () => {
        const res = await api.request('GET', `/admin/v1/audit-events?action=${action}${query}`, {
          headers: auth,
        });
        expect(res.status).toBe(200);
        events = res.body.events;
        return events.length >= count;
      },
      2_000,
      `${count} ${action} event(s)`,
      50,
    );
    console.log(`${action} listed ${took} ms after the change`);
    return events;
  }

  const issue = async (apiKey: string) => {
    const res = await api.request('POST', '/api/v1/credentials', {
      headers: { 'x-api-key': apiKey },
      body: {},
    });
    expect(res.status).toBe(201);
    return res.body as { jti: string; token: string };
  };

  it('a credential revocation is listed within 2 s, once, with the user, the client address and the request id', async () => {
    const a = await tenant();
    const credential = await issue(a.apiKey);
    const revoked = await api.request('POST', `/admin/v1/credentials/${credential.jti}/revoke`, {
      headers: { ...a.auth, 'user-agent': 'audit-e2e/1.0', 'x-request-id': 'req-audit-e2e-1' },
    });
    expect(revoked.status).toBe(200);
    const [event, ...more] = await listed(a.auth, 'credential.revoke', 1);
    expect(more).toEqual([]);
    expect(event).toMatchObject({
      tenant_id: a.tenantId,
      actor: { type: 'user', id: a.userId },
      target: { type: 'credential', id: credential.jti },
      outcome: 'success',
      ip: '127.0.0.1',
      user_agent: 'audit-e2e/1.0',
      request_id: 'req-audit-e2e-1',
    });
    expect(JSON.stringify(event)).not.toContain(credential.token);

    // Another tenant never sees it.
    const b = await tenant();
    const theirs = await api.request('GET', '/admin/v1/audit-events?action=credential.revoke', {
      headers: b.auth,
    });
    expect(theirs.status).toBe(200);
    expect(theirs.body.events).toEqual([]);
    // Both issuers deliver: still exactly one, also after more polls have passed.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(await listed(a.auth, 'credential.revoke', 1)).toHaveLength(1);
    const verify = await api.request('GET', '/admin/v1/audit-events/verify', { headers: a.auth });
    expect(verify.body).toMatchObject({ ok: true, first_bad_id: null });
  });

  it('a plan change by a platform admin, and a checkout, are listed in the tenant’s trail with from, to and cause', async () => {
    const a = await tenant();
    const set = await api.request('PUT', `/admin/v1/tenants/${a.tenantId}/plan`, {
      headers: root,
      body: { plan: 'pro' },
    });
    expect(set.status).toBe(200);
    const [change] = await listed(a.auth, 'plan.change', 1);
    expect(change).toMatchObject({
      tenant_id: a.tenantId,
      actor: { type: 'user', id: rootUserId },
      target: { type: 'tenant', id: a.tenantId },
      details: { from: 'free', to: 'pro', cause: 'set_plan' },
    });

    const checkout = await api.request('POST', '/admin/v1/billing/checkout-sessions', {
      headers: a.auth,
      body: { plan: 'enterprise' },
    });
    expect(checkout.status).toBe(201);
    const [created] = await listed(a.auth, 'checkout.create', 1);
    expect(created).toMatchObject({
      actor: { type: 'user', id: a.userId },
      target: { type: 'checkout_session', id: checkout.body.id },
    });
    // The built-in confirmation page's form (HTML, outside the JSON API).
    const confirmed = await fetch(checkout.body.url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
    });
    expect(confirmed.status).toBe(200);
    const [confirm] = await listed(a.auth, 'checkout.confirm', 1);
    expect(confirm?.target).toEqual({ type: 'checkout_session', id: checkout.body.id });
    const changes = await listed(a.auth, 'plan.change', 2);
    expect(changes.map((e) => e.details)).toEqual([
      { from: 'pro', to: 'enterprise', cause: 'checkout' },
      { from: 'free', to: 'pro', cause: 'set_plan' },
    ]);
  });

  it('a relay registration and a manual key rotation are listed in the platform trail (tenant_id=platform)', async () => {
    const relay = await api.request('POST', '/admin/v1/relays', {
      headers: root,
      body: { region: 'eu-west', host: 'relay.audit.example', port: 4433 },
    });
    expect(relay.status).toBe(201);
    const [registered] = await listed(root, 'relay.register', 1, '&tenant_id=platform');
    expect(registered).toMatchObject({
      tenant_id: null,
      actor: { type: 'user', id: rootUserId },
      target: { type: 'relay', id: relay.body.relay.id },
      details: { region: 'eu-west', host: 'relay.audit.example', port: 4433 },
    });
    expect(JSON.stringify(registered)).not.toContain(relay.body.token);

    const rotated = await api.request('POST', '/admin/v1/signing-keys/rotate', { headers: root, body: {} });
    expect([200, 202]).toContain(rotated.status);
    const [rotation] = await listed(root, 'signing_key.rotate', 1, '&tenant_id=platform');
    expect(rotation).toMatchObject({
      actor: { type: 'user', id: rootUserId },
      details: { trigger: 'manual', requested_by: rootUserId },
    });
    const deleted = await api.request('DELETE', `/admin/v1/relays/${relay.body.relay.id}`, { headers: root });
    expect(deleted.status).toBe(204);
    await listed(root, 'relay.delete', 1, '&tenant_id=platform');
  });

  it('a revocation whose outbox row cannot be written answers 503 + Retry-After and revokes nothing', async () => {
    const a = await tenant();
    const credential = await issue(a.apiKey);
    const db = new pg.Client({ connectionString: database.url });
    await db.connect();
    try {
      await db.query(
        `create function issuer.refuse_audit() returns trigger language plpgsql as $$ begin raise exception 'audit outbox refused (test)'; end $$`,
      );
      await db.query(
        'create trigger refuse_audit before insert on issuer.audit_outbox for each row execute function issuer.refuse_audit()',
      );
      const refused = await api.request('POST', `/admin/v1/credentials/${credential.jti}/revoke`, {
        headers: a.auth,
      });
      expect(refused.status).toBe(503);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.body).toEqual({ error: expect.any(String) });
      const row = await db.query('select revoked_at from issuer.credentials where jti = $1', [
        credential.jti,
      ]);
      expect(row.rows[0]?.revoked_at).toBeNull();
    } finally {
      await db.query('drop trigger if exists refuse_audit on issuer.audit_outbox');
      await db.query('drop function if exists issuer.refuse_audit()');
      await db.end();
    }
    // The credential still works: the relay assignment accepts it.
    const assigned = await api.request('GET', '/v1/relays/assignment', {
      headers: { authorization: `Bearer ${credential.token}` },
    });
    expect(assigned.status).toBe(200);
    const none = await api.request('GET', '/admin/v1/audit-events?action=credential.revoke', {
      headers: a.auth,
    });
    expect(none.body.events).toEqual([]);
  });
});
