/**
 * Plans that bite, end to end: the four apps as processes on PostgreSQL and Redis. Each plan
 * limit answers its exact status and a message naming the limit and the plan; an upgrade —
 * through the built-in checkout page, or through a signed Stripe webhook — lifts it at once,
 * without restarting anything. Stripe is the one outside world faked: a local HTTP server
 * answers the SDK's checkout call, and webhooks are signed the way Stripe signs them.
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';

const OWNER = { email: 'billing-owner@example.test', password: 'billing owner password' };
const WEBHOOK_SECRET = 'whsec_e2eBillingSecret0123456789';

function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
  writeFileSync(
    path,
    [
      'plans:',
      '  free:',
      '    limits: { max_concurrent_connections: 2, max_api_keys: 1, max_projects: 1, max_bots: 1, max_allowlist_entries: 1 }',
      '  pro:',
      '    stripe_price_id: price_pro_e2e',
      '    limits: { max_concurrent_connections: 50, max_api_keys: 10, max_projects: 10, max_bots: 10, max_allowlist_entries: 10 }',
      '',
    ].join('\n'),
  );
  return path;
}

interface Tenant {
  auth: { authorization: string };
  projectId: string;
  key: string;
}

let counter = 0;

/** A new free tenant with one project and one API key (both at the free limits). */
async function freeTenant(api: Api): Promise<Tenant> {
  const n = ++counter;
  const credentials = { email: `bill${n}-${Date.now()}@example.test`, password: 'tenant password 123' };
  const signup = await api.request('POST', '/admin/v1/auth/signup', {
    body: { ...credentials, tenant_name: `Bill ${n}` },
  });
  expect(signup.status).toBe(201);
  const login = await api.request('POST', '/admin/v1/auth/login', { body: credentials });
  const auth = { authorization: `Bearer ${login.body.token}` };
  const project = await api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'first' } });
  expect(project.status).toBe(201);
  const key = await api.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
    headers: auth,
    body: { scopes: ['relay:session'] },
  });
  expect(key.status).toBe(201);
  return { auth, projectId: project.body.id, key: key.body.key };
}

/** The first request over each free limit: exact status and a message naming limit and plan. */
async function expectFreeLimits(api: Api, t: Tenant): Promise<void> {
  const project = await api.request('POST', '/admin/v1/projects', {
    headers: t.auth,
    body: { name: 'second' },
  });
  expect(project.status).toBe(422);
  expect(project.body.error).toMatch(/free plan .*max_projects/);

  const key = await api.request('POST', `/admin/v1/projects/${t.projectId}/api-keys`, {
    headers: t.auth,
    body: {},
  });
  expect(key.status).toBe(402);
  expect(key.body.error).toMatch(/free plan .*max_api_keys/);

  const first = await api.request('POST', `/admin/v1/projects/${t.projectId}/allowlist`, {
    headers: t.auth,
    body: { cidr: '0.0.0.0/0' },
  });
  expect(first.status).toBe(201);
  const entry = await api.request('POST', `/admin/v1/projects/${t.projectId}/allowlist`, {
    headers: t.auth,
    body: { cidr: '::/0' },
  });
  expect(entry.status).toBe(422);
  expect(entry.body.error).toMatch(/free plan .*max_allowlist_entries/);

  const bot = await api.request('POST', `/admin/v1/projects/${t.projectId}/bots`, {
    headers: t.auth,
    body: { name: 'first-bot' },
  });
  expect(bot.status).toBe(201);
  const overBot = await api.request('POST', `/admin/v1/projects/${t.projectId}/bots`, {
    headers: t.auth,
    body: { name: 'second-bot' },
  });
  expect(overBot.status).toBe(422);
  expect(overBot.body.error).toMatch(/free plan .*max_bots/);

  for (let i = 0; i < 2; i++) {
    const ok = await issue(api, t);
    expect(ok.status).toBe(201);
  }
  const over = await issue(api, t);
  expect(over.status).toBe(402);
  expect(over.body.error).toMatch(/free plan .*max_concurrent_connections/);
}

/** The same requests once the tenant is on pro: all succeed. */
async function expectProLimits(api: Api, t: Tenant): Promise<void> {
  expect(
    (await api.request('POST', '/admin/v1/projects', { headers: t.auth, body: { name: 'second' } })).status,
  ).toBe(201);
  expect(
    (await api.request('POST', `/admin/v1/projects/${t.projectId}/api-keys`, { headers: t.auth, body: {} }))
      .status,
  ).toBe(201);
  expect(
    (
      await api.request('POST', `/admin/v1/projects/${t.projectId}/allowlist`, {
        headers: t.auth,
        body: { cidr: '::/0' },
      })
    ).status,
  ).toBe(201);
  expect(
    (
      await api.request('POST', `/admin/v1/projects/${t.projectId}/bots`, {
        headers: t.auth,
        body: { name: 'second-bot' },
      })
    ).status,
  ).toBe(201);
  expect((await issue(api, t)).status).toBe(201);
}

const issue = (api: Api, t: Tenant) =>
  api.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': t.key }, body: {} });

async function plan(api: Api, t: Tenant): Promise<string> {
  const res = await api.request('GET', '/admin/v1/billing/subscription', { headers: t.auth });
  expect(res.status).toBe(200);
  return res.body.plan.id;
}

describe('billing: built-in provider', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;
  let other: Api;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_billing');
    redis = createTestRedis('e2e_billing');
    system = await startDistributed({
      label: 'billing',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 5).toString('base64'),
      bootstrap: OWNER,
      // Two gateways: a plan change must reach both entitlement caches at once.
      replicas: { gateway: 2 },
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plansFile(),
        BILLING_CHECKOUT_MAX_PER_WINDOW: '3',
        BILLING_CHECKOUT_WINDOW_SECONDS: '60',
        // The usage job (bullmq) aggregates yesterday and today every second.
        BILLING_USAGE_INTERVAL_MS: '1000',
        // Checkout of paid plans through the built-in provider (off by default: billing-abuse.test.ts).
        BILLING_BUILTIN_PAID_CHECKOUT: 'true',
      },
    });
    api = await Api.connect(system.baseUrl);
    other = await Api.connect(system.baseUrls[1] ?? '');
  }, 120_000);

  afterAll(async () => {
    await system?.stop();
    await redis?.clean();
    await database?.drop();
  });

  it('each free limit answers its exact status and names limit and plan; the built-in checkout lifts them at once', async () => {
    const t = await freeTenant(api);
    await expectFreeLimits(api, t);

    const session = await api.request('POST', '/admin/v1/billing/checkout-sessions', {
      headers: t.auth,
      body: { plan: 'pro' },
    });
    expect(session.status).toBe(201);
    expect(session.body).toMatchObject({ plan: 'pro', provider: 'builtin', status: 'open' });
    const path = new URL(session.body.url).pathname;
    expect(path).toBe(`/billing/checkout/${session.body.id}`);
    const page = await fetch(`${system.baseUrl}${path}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<form method="post"');
    expect(await plan(api, t)).toBe('free');

    const confirm = await fetch(`${system.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
    });
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain('<b>pro</b>');
    expect(await plan(api, t)).toBe('pro');
    // No restart, no waiting: the gateways' entitlement caches were told (plans.changed).
    await expectProLimits(api, t);
  });

  it('a plan change reaches every gateway at once, a downgrade below current usage included', async () => {
    const t = await freeTenant(api);
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const admin = { authorization: `Bearer ${login.body.token}` };
    const tenantId = (await api.request('GET', '/admin/v1/auth/session', { headers: t.auth })).body.tenant.id;
    // The second gateway caches the free plan's cap (2) by hitting it.
    expect((await issue(other, t)).status).toBe(201);
    expect((await issue(other, t)).status).toBe(201);
    expect((await issue(other, t)).status).toBe(402);

    expect(
      (
        await api.request('PUT', `/admin/v1/tenants/${tenantId}/plan`, {
          headers: admin,
          body: { plan: 'pro' },
        })
      ).status,
    ).toBe(200);
    // At once, on the gateway that did not make the change (its cache would otherwise hold 1 s).
    const live: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await issue(other, t);
      expect(res.status, `credential ${i + 3} on pro`).toBe(201);
      live.push(res.body.token);
    }
    // Downgrade with 5 credentials live, over the free cap: they stay valid; new ones are refused.
    expect(
      (
        await api.request('PUT', `/admin/v1/tenants/${tenantId}/plan`, {
          headers: admin,
          body: { plan: 'free' },
        })
      ).status,
    ).toBe(200);
    for (const gw of [api, other]) {
      const refused = await issue(gw, t);
      expect(refused.status).toBe(402);
      expect(refused.body.error).toMatch(/free plan .*max_concurrent_connections/);
    }
    // Credentials issued on pro live out their TTL: still accepted after the downgrade.
    for (const token of live) {
      const still = await other.request('GET', '/v1/relays/assignment', {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(still.status).toBe(200);
    }
  });

  it('throttles checkout per tenant with 429 + Retry-After while another tenant is unaffected; an Idempotency-Key makes one session', async () => {
    const a = await freeTenant(api);
    const b = await freeTenant(api);
    const first = await api.request('POST', '/admin/v1/billing/checkout-sessions', {
      headers: { ...a.auth, 'idempotency-key': 'order-42' },
      body: { plan: 'pro' },
    });
    expect(first.status).toBe(201);
    const again = await api.request('POST', '/admin/v1/billing/checkout-sessions', {
      headers: { ...a.auth, 'idempotency-key': 'order-42' },
      body: { plan: 'pro' },
    });
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    const burst = [];
    for (let i = 0; i < 5; i++) {
      burst.push(
        await api.request('POST', '/admin/v1/billing/checkout-sessions', {
          headers: a.auth,
          body: { plan: 'pro' },
        }),
      );
    }
    const statuses = burst.map((r) => r.status);
    // 3 per window: the keyed request took one, the replay none.
    expect(statuses).toEqual([201, 201, 429, 429, 429]);
    const limited = burst[2];
    expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Object.keys(limited?.body ?? {})).toEqual(['error']);

    const other = await api.request('POST', '/admin/v1/billing/checkout-sessions', {
      headers: b.auth,
      body: { plan: 'pro' },
    });
    expect(other.status).toBe(201);
  });

  it('lets a platform admin set a plan directly, effective at once', async () => {
    const t = await freeTenant(api);
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const admin = { authorization: `Bearer ${login.body.token}` };
    const session = await api.request('GET', '/admin/v1/auth/session', { headers: t.auth });
    const tenantId = session.body.tenant.id;
    const set = await api.request('PUT', `/admin/v1/tenants/${tenantId}/plan`, {
      headers: admin,
      body: { plan: 'pro' },
    });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ tenant_id: tenantId, plan: 'pro' });
    expect(await plan(api, t)).toBe('pro');
    expect(
      (
        await api.request('PUT', '/admin/v1/tenants/ten_00000000000000000000/plan', {
          headers: admin,
          body: { plan: 'pro' },
        })
      ).status,
    ).toBe(404);
    expect(
      (
        await api.request('PUT', `/admin/v1/tenants/${tenantId}/plan`, {
          headers: t.auth,
          body: { plan: 'free' },
        })
      ).status,
    ).toBe(403);
  });

  it('meters usage: N credentials issued today read back as N issued and a peak of N, for the tenant and its project', async () => {
    const t = await freeTenant(api);
    // Pro, so N = 3 live credentials fit (the free plan here allows 2 at once).
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const admin = { authorization: `Bearer ${login.body.token}` };
    const tenantId = (await api.request('GET', '/admin/v1/auth/session', { headers: t.auth })).body.tenant.id;
    expect(
      (
        await api.request('PUT', `/admin/v1/tenants/${tenantId}/plan`, {
          headers: admin,
          body: { plan: 'pro' },
        })
      ).status,
    ).toBe(200);

    const N = 3;
    for (let i = 0; i < N; i++) expect((await issue(api, t)).status).toBe(201);
    const today = new Date().toISOString().slice(0, 10);
    // No relay session ended here: the session columns of the day are 0 (docs/billing.md, Usage).
    const expected = {
      day: today,
      credentials_issued: N,
      peak_concurrent_connections: N,
      sessions_ended: 0,
      session_minutes: 0,
      bytes_sent: 0,
      bytes_received: 0,
    };

    const deadline = Date.now() + 15_000;
    type Row = {
      day: string;
      project_id: string | null;
      credentials_issued: number;
      peak_concurrent_connections: number;
    };
    const complete = (row: Row | undefined) =>
      row?.credentials_issued === N && row.peak_concurrent_connections === N;
    let days: Row[] = [];
    for (;;) {
      const res = await api.request('GET', `/admin/v1/billing/usage?from=${today}&to=${today}`, {
        headers: t.auth,
      });
      expect(res.status).toBe(200);
      days = res.body.days;
      const tenantRow = days.find((d) => d.project_id === null);
      const projectRow = days.find((d) => d.project_id === t.projectId);
      if ((complete(tenantRow) && complete(projectRow)) || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(days).toEqual([
      { ...expected, project_id: null },
      { ...expected, project_id: t.projectId },
    ]);

    const backwards = await api.request('GET', `/admin/v1/billing/usage?from=${today}&to=2000-01-01`, {
      headers: t.auth,
    });
    expect(backwards.status).toBe(400);
  }, 30_000);
});

describe('billing: Stripe provider (local Stripe API stand-in, signed webhooks)', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;
  let stripe: Server;
  const created: URLSearchParams[] = [];

  const sign = (payload: string, timestamp = Math.floor(Date.now() / 1000), secret = WEBHOOK_SECRET) =>
    `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${payload}`).digest('hex')}`;

  const webhook = (payload: string, signature: string) =>
    fetch(`${system.baseUrl}/v1/billing/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
    });

  const completed = (id: string, tenantId: string, checkoutSessionId: string) =>
    JSON.stringify({
      id,
      object: 'event',
      type: 'checkout.session.completed',
      created: Math.floor(Date.now() / 1000),
      data: {
        object: {
          id: 'cs_test_e2e',
          object: 'checkout.session',
          client_reference_id: tenantId,
          metadata: { tenant_id: tenantId, plan_id: 'pro', checkout_session_id: checkoutSessionId },
          payment_status: 'paid',
        },
      },
    });

  beforeAll(async () => {
    // The part of the Stripe API the provider uses: creating a checkout session.
    stripe = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString();
      });
      req.on('end', () => {
        if (req.method === 'POST' && req.url === '/v1/checkout/sessions') {
          const params = new URLSearchParams(body);
          created.push(params);
          const id = `cs_test_${created.length}`;
          res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${created.length}` });
          res.end(
            JSON.stringify({
              id,
              object: 'checkout.session',
              url: `https://checkout.stripe.test/pay/${id}`,
              client_reference_id: params.get('client_reference_id'),
              metadata: {},
            }),
          );
          return;
        }
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { type: 'invalid_request_error', message: `no route ${req.url}` } }));
      });
    });
    await new Promise<void>((resolve) => stripe.listen(0, '127.0.0.1', resolve));
    const address = stripe.address();
    if (!address || typeof address === 'string') throw new Error('no port');

    database = await createTestDatabase('e2e_stripe');
    redis = createTestRedis('e2e_stripe');
    system = await startDistributed({
      label: 'stripe',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 6).toString('base64'),
      bootstrap: OWNER,
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plansFile(),
        BILLING_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: 'sk_test_e2e',
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_API_BASE: `http://127.0.0.1:${address.port}`,
      },
    });
    api = await Api.connect(system.baseUrl);
  }, 120_000);

  afterAll(async () => {
    await system?.stop();
    await new Promise<void>((resolve) => stripe?.close(() => resolve()));
    await redis?.clean();
    await database?.drop();
  });

  it('creates the checkout with Stripe, and a signed checkout.session.completed lifts every limit at once', async () => {
    const t = await freeTenant(api);
    await expectFreeLimits(api, t);
    const tenantId = (await api.request('GET', '/admin/v1/auth/session', { headers: t.auth })).body.tenant.id;

    const session = await api.request('POST', '/admin/v1/billing/checkout-sessions', {
      headers: t.auth,
      body: { plan: 'pro' },
    });
    expect(session.status).toBe(201);
    expect(session.body).toMatchObject({ provider: 'stripe', status: 'open' });
    expect(session.body.url).toMatch(/^https:\/\/checkout\.stripe\.test\/pay\/cs_test_\d+$/);
    const sent = created.at(-1);
    expect(sent?.get('mode')).toBe('subscription');
    expect(sent?.get('line_items[0][price]')).toBe('price_pro_e2e');
    expect(sent?.get('metadata[tenant_id]')).toBe(tenantId);
    expect(sent?.get('metadata[plan_id]')).toBe('pro');

    const payload = completed('evt_e2e_1', tenantId, session.body.id);
    const res = await webhook(payload, sign(payload));
    expect(res.status).toBe(200);
    expect(await plan(api, t)).toBe('pro');
    await expectProLimits(api, t);
  });

  it('a forged or stale webhook answers 400, a replayed one 200, and none changes anything', async () => {
    const t = await freeTenant(api);
    const tenantId = (await api.request('GET', '/admin/v1/auth/session', { headers: t.auth })).body.tenant.id;
    const payload = completed('evt_e2e_2', tenantId, 'cks_00000000000000000000');

    const forged = await webhook(payload, sign(payload, undefined, 'whsec_not_the_secret'));
    expect(forged.status).toBe(400);
    expect(Object.keys((await forged.json()) as object)).toEqual(['error']);
    const stale = await webhook(payload, sign(payload, Math.floor(Date.now() / 1000) - 3_600));
    expect(stale.status).toBe(400);
    const unsigned = await webhook(payload, 't=1,v1=00');
    expect(unsigned.status).toBe(400);
    expect(await plan(api, t)).toBe('free');

    const ok = await webhook(payload, sign(payload));
    expect(ok.status).toBe(200);
    expect(await plan(api, t)).toBe('pro');
    // Back to free through a cancellation, then the first event replayed: answered, no change.
    const cancel = JSON.stringify({
      id: 'evt_e2e_3',
      object: 'event',
      type: 'customer.subscription.deleted',
      created: Math.floor(Date.now() / 1000),
      data: {
        object: { id: 'sub_e2e', object: 'subscription', metadata: { tenant_id: tenantId, plan_id: 'pro' } },
      },
    });
    expect((await webhook(cancel, sign(cancel))).status).toBe(200);
    expect(await plan(api, t)).toBe('free');
    const replayed = await webhook(payload, sign(payload));
    expect(replayed.status).toBe(200);
    expect(await plan(api, t)).toBe('free');
  });
});
