/**
 * Admin's audit trail end to end (issue 17 item 1; docs/audit.md): billing, two admin replicas,
 * an issuer and two gateways as separate processes on PostgreSQL and Redis. Changes made through
 * both gateways at once stay one linear chain per tenant across the admin replicas and verify;
 * tenant B never sees tenant A's events; an edited row is reported by verify; an audit write
 * PostgreSQL refuses fails the request with 503 + Retry-After and leaves no change.
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

const OWNER = { email: 'trail-root@example.test', password: 'audit trail password' };

interface Event {
  id: string;
  tenant_id: string | null;
  actor: { type: string; id: string };
  action: string;
  target: { type: string; id: string };
  outcome: string;
  ip: string | null;
  user_agent: string | null;
  request_id: string | null;
}

describe('the audit trail across admin replicas and gateways', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let gateways: Api[];
  let root: { authorization: string };
  let rootTenant: string;
  let rootUser: string;
  let sql: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_audit_trail');
    redis = createTestRedis('e2e_audit_trail');
    system = await startDistributed({
      label: 'audit-trail',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 7).toString('base64'),
      bootstrap: OWNER,
      replicas: { admin: 2, gateway: 2 },
    });
    gateways = await Promise.all(system.baseUrls.map((url) => Api.connect(url)));
    const login = await gateways[0]?.request('POST', '/admin/v1/auth/login', { body: OWNER });
    root = { authorization: `Bearer ${login?.body.token}` };
    const me = (await gateways[1]?.request('GET', '/admin/v1/auth/session', { headers: root }))?.body;
    rootTenant = me.tenant.id;
    rootUser = me.user.id;
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
  }, 180_000);

  afterAll(async () => {
    await sql?.end();
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  const gw = (i: number) => gateways[i % gateways.length] as Api;

  async function events(api: Api, auth: { authorization: string }, query = ''): Promise<Event[]> {
    const res = await api.request('GET', `/admin/v1/audit-events?limit=200${query}`, { headers: auth });
    expect(res.status).toBe(200);
    return res.body.events;
  }

  it('changes made at once through two gateways and two admins form one linear chain that verifies', async () => {
    const created = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        gw(i).request('POST', '/admin/v1/projects', {
          headers: { ...root, 'user-agent': `trail-e2e/${i}` },
          body: { name: `concurrent-${i}` },
        }),
      ),
    );
    expect(created.map((r) => r.status)).toEqual(created.map(() => 201));

    const listed = await events(gw(1), root, '&action=project.create');
    expect(listed).toHaveLength(40);
    const byTarget = new Map(listed.map((e) => [e.target.id, e]));
    created.forEach((res, i) => {
      // Exactly one event per change, with who, from where and with what.
      expect(byTarget.get(res.body.id)).toMatchObject({
        tenant_id: rootTenant,
        actor: { type: 'user', id: rootUser },
        outcome: 'success',
        ip: '127.0.0.1',
        user_agent: `trail-e2e/${i}`,
        request_id: res.headers.get('x-request-id'),
      });
    });

    const { rows } = await sql.query<{ seq: string; prev_hash: string; hash: string }>(
      'select seq, prev_hash, hash from admin.audit_events where chain_key = $1 order by seq',
      [rootTenant],
    );
    rows.forEach((row, i) => {
      expect(Number(row.seq)).toBe(i + 1);
      if (i > 0) expect(row.prev_hash).toBe(rows[i - 1]?.hash);
    });
    for (const api of gateways) {
      const verify = await api.request('GET', '/admin/v1/audit-events/verify', { headers: root });
      expect(verify.body).toMatchObject({
        ok: true,
        events_checked: rows.length,
        first_bad_id: null,
        first_bad_seq: null,
        checkpoint_ok: true,
        anchor_ok: true,
      });
    }
  });

  it('tenant B sees none of tenant A’s events on either gateway', async () => {
    const signup = await gw(0).request('POST', '/admin/v1/auth/signup', {
      body: { email: 'trail-b@example.test', password: 'tenant b password', tenant_name: 'B' },
    });
    expect(signup.status).toBe(201);
    const login = await gw(1).request('POST', '/admin/v1/auth/login', {
      body: { email: 'trail-b@example.test', password: 'tenant b password' },
    });
    const b = { authorization: `Bearer ${login.body.token}` };
    for (const api of gateways) {
      const seen = await events(api, b);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((e) => e.tenant_id === signup.body.tenant.id)).toBe(true);
      const named = await api.request('GET', `/admin/v1/audit-events?tenant_id=${rootTenant}`, {
        headers: b,
      });
      expect(named.status).toBe(403);
    }
  });

  it('an audit write PostgreSQL refuses answers 503 + Retry-After and leaves no change', async () => {
    await sql.query(`create or replace function e2e_audit_refuse() returns trigger language plpgsql as $$
      begin raise exception 'refused by the test'; end $$`);
    await sql.query(
      'create trigger e2e_audit_refuse before insert on admin.audit_events for each row execute function e2e_audit_refuse()',
    );
    let refused: Awaited<ReturnType<Api['request']>>;
    try {
      refused = await gw(0).request('POST', '/admin/v1/projects', {
        headers: root,
        body: { name: 'refused' },
      });
    } finally {
      await sql.query('drop trigger e2e_audit_refuse on admin.audit_events');
    }
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.body).toEqual({ error: 'the audit trail cannot record this change; retry shortly' });
    const projects = await gw(1).request('GET', '/admin/v1/projects', { headers: root });
    expect(projects.body.projects.map((p: { name: string }) => p.name)).not.toContain('refused');
    const verify = await gw(1).request('GET', '/admin/v1/audit-events/verify', { headers: root });
    expect(verify.body.ok).toBe(true);
  });

  it('editing one row in the database makes verify report it, on every gateway', async () => {
    const { rows } = await sql.query<{ id: string }>(
      "select id from admin.audit_events where chain_key = $1 and action = 'project.create' order by seq limit 1 offset 5",
      [rootTenant],
    );
    const victim = rows[0]?.id;
    await sql.query(`update admin.audit_events set details = '{"name":"forged"}' where id = $1`, [victim]);
    for (const api of gateways) {
      const verify = await api.request('GET', '/admin/v1/audit-events/verify', { headers: root });
      expect(verify.body).toMatchObject({ ok: false, first_bad_id: victim });
    }
  });
});
