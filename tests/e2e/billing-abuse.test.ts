/**
 * Billing's abuse paths, end to end (issue 18, items 1 and 2): the four apps as processes on
 * PostgreSQL and Redis, billing restarted between parts with another configuration, as an
 * operator would change it.
 *
 * - A free tenant cannot reach a paid plan through the built-in provider by default (422, the
 *   refusal in its audit trail), and can once the operator sets BILLING_BUILTIN_PAID_CHECKOUT;
 *   a session handed out meanwhile is not confirmed once the setting is off again.
 * - With the Stripe provider: a forged, an unpaid, an out-of-order and a replayed event each
 *   leave the plan unchanged; all but the forged one are answered 200 (Stripe retries anything
 *   else for days). Webhooks are signed as Stripe signs them (HMAC-SHA256 over "<t>.<payload>").
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
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
import { waitFor } from '../support/ports.ts';
import { type Proc, startProcess } from '../support/processes.ts';

const LABEL = 'billing-abuse';
const OWNER = { email: 'abuse-owner@example.test', password: 'billing abuse owner password' };
const WEBHOOK_SECRET = 'whsec_e2eAbuseSecret0123456789';
const SETTING = 'BILLING_BUILTIN_PAID_CHECKOUT';

function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
  // Prices for the Stripe part; the built-in provider ignores them.
  writeFileSync(
    path,
    [
      'plans:',
      '  pro:',
      '    stripe_price_id: price_pro_abuse',
      '  enterprise:',
      '    stripe_price_id: price_enterprise_abuse',
      '',
    ].join('\n'),
  );
  return path;
}

interface Tenant {
  auth: { authorization: string };
  tenantId: string;
}

/** An audit event as `GET /admin/v1/audit-events` lists it (the fields these tests read). */
interface TrailEvent {
  outcome: string;
  target: { type: string; id: string };
  details: Record<string, unknown>;
}

describe('billing abuse paths: no free upgrades, Stripe events paid and in order', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;
  let root: { authorization: string };
  /** The billing process started by this file in place of the system's (stopped in afterAll). */
  let billing: Proc | undefined;
  let restarts = 0;
  let tenants = 0;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_billing_abuse');
    redis = createTestRedis('e2e_billing_abuse');
    system = await startDistributed({
      label: LABEL,
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 8).toString('base64'),
      bootstrap: OWNER,
      extraEnv: { RELAYPLANE_PLANS_FILE: plansFile() },
    });
    api = await Api.connect(system.baseUrl);
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
    root = { authorization: `Bearer ${login.body.token}` };
  }, 180_000);

  afterAll(async () => {
    await billing?.stop();
    await system?.stop();
    await redis?.clean();
    await database?.drop();
  });

  /**
   * Billing stopped and started again on its port with `env` over the system's, as an operator
   * changes its configuration; resolves once a call through the gateway reaches it again.
   */
  async function restartBilling(env: Record<string, string>): Promise<void> {
    const current = billing ?? system.procs.find((p) => p.name === `${LABEL}-billing`);
    if (!current) throw new Error('no billing process');
    expect(await current.stop()).toBe(0);
    billing = startProcess(
      `${LABEL}-billing`,
      'apps/billing/src/main.ts',
      { ...system.env, ...env },
      {
        appendLog: true,
      },
    );
    restarts++;
    await waitFor(
      async () => {
        if (billing?.child.exitCode !== null)
          throw new Error(`billing exited:\n${billing?.output().slice(-4_000)}`);
        const res = await fetch(`${system.baseUrl}/admin/v1/billing/subscription`, { headers: root });
        return res.status === 200;
      },
      60_000,
      `billing restart ${restarts} to answer through the gateway`,
      200,
    );
  }

  /** A new user with a tenant of their own, on the free plan. */
  async function freeTenant(): Promise<Tenant> {
    const n = ++tenants;
    const login = { email: `abuse${n}-${Date.now()}@example.test`, password: 'tenant password 123' };
    const signup = await api.request('POST', '/admin/v1/auth/signup', {
      body: { ...login, tenant_name: `Abuse ${n}` },
    });
    expect(signup.status).toBe(201);
    const session = await api.request('POST', '/admin/v1/auth/login', { body: login });
    const auth = { authorization: `Bearer ${session.body.token}` };
    const me = await api.request('GET', '/admin/v1/auth/session', { headers: auth });
    return { auth, tenantId: me.body.tenant.id };
  }

  async function planOf(t: Tenant): Promise<string> {
    const res = await api.request('GET', '/admin/v1/billing/subscription', { headers: t.auth });
    expect(res.status).toBe(200);
    return res.body.plan.id;
  }

  const checkout = (t: Tenant, plan: string) =>
    api.request('POST', '/admin/v1/billing/checkout-sessions', { headers: t.auth, body: { plan } });

  /** The built-in confirmation page's form, as a browser posts it (HTML, outside the JSON API). */
  const confirm = (url: string) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
    });

  /** The tenant's audit events of `action` (its owner lists them), once `count` are there. */
  async function trail(t: Tenant, action: string, count: number): Promise<TrailEvent[]> {
    let events: TrailEvent[] = [];
    await waitFor(
      async () => {
        const res = await api.request('GET', `/admin/v1/audit-events?action=${action}`, { headers: t.auth });
        expect(res.status).toBe(200);
        events = res.body.events;
        return events.length >= count;
      },
      5_000,
      `${count} ${action} event(s) in the tenant's trail`,
    );
    return events;
  }

  describe('built-in provider, paid checkout off (the default)', () => {
    it('a free tenant cannot check out pro or enterprise: 422 naming the setting, refusal in its trail', async () => {
      const t = await freeTenant();
      for (const plan of ['pro', 'enterprise']) {
        const res = await checkout(t, plan);
        expect(res.status).toBe(422);
        expect(Object.keys(res.body)).toEqual(['error']);
        expect(res.body.error).toContain(`${SETTING}=true`);
      }
      expect(await planOf(t)).toBe('free');
      const refused = await trail(t, 'checkout.create', 2);
      expect(refused.map((e) => [e.outcome, e.details.plan_id, e.details.reason]).sort()).toEqual([
        ['denied', 'enterprise', 'builtin_paid_checkout_off'],
        ['denied', 'pro', 'builtin_paid_checkout_off'],
      ]);
    });

    it('a platform admin still sets any plan, and the tenant can check out the free plan back', async () => {
      const t = await freeTenant();
      const set = await api.request('PUT', `/admin/v1/tenants/${t.tenantId}/plan`, {
        headers: root,
        body: { plan: 'enterprise' },
      });
      expect(set.status).toBe(200);
      expect(await planOf(t)).toBe('enterprise');
      const down = await checkout(t, 'free');
      expect(down.status).toBe(201);
      expect((await confirm(down.body.url)).status).toBe(200);
      expect(await planOf(t)).toBe('free');
    });
  });

  describe(`built-in provider with ${SETTING}=true`, () => {
    /** A pro session handed out while the setting is on, confirmed after it is off again. */
    let pending: { tenant: Tenant; url: string };

    beforeAll(async () => {
      await restartBilling({ [SETTING]: 'true' });
    }, 120_000);

    it('a free tenant checks out pro and confirms it', async () => {
      const t = await freeTenant();
      const session = await checkout(t, 'pro');
      expect(session.status).toBe(201);
      expect(session.body).toMatchObject({ plan: 'pro', provider: 'builtin', status: 'open' });
      const confirmed = await confirm(session.body.url);
      expect(confirmed.status).toBe(200);
      expect(await confirmed.text()).toContain('<b>pro</b>');
      expect(await planOf(t)).toBe('pro');

      const other = await freeTenant();
      const handedOut = await checkout(other, 'enterprise');
      expect(handedOut.status).toBe(201);
      pending = { tenant: other, url: handedOut.body.url };
    });

    it('once the setting is off again, a session handed out meanwhile is not confirmed (422 page)', async () => {
      await restartBilling({});
      const res = await confirm(pending.url);
      expect(res.status).toBe(422);
      expect(await res.text()).toContain(SETTING);
      expect(await planOf(pending.tenant)).toBe('free');
      const [refused] = await trail(pending.tenant, 'checkout.confirm', 1);
      expect(refused).toMatchObject({ outcome: 'denied', details: { plan_id: 'enterprise' } });
    }, 120_000);
  });

  describe('Stripe provider: forged, unpaid, out-of-order and replayed events', () => {
    const T = Math.floor(Date.now() / 1000) - 600;
    let n = 0;

    beforeAll(async () => {
      await restartBilling({
        BILLING_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: 'sk_test_e2eAbuse',
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        // No checkout is created here: nothing may reach the real Stripe.
        STRIPE_API_BASE: 'http://127.0.0.1:1',
      });
    }, 120_000);

    const sign = (payload: string, secret = WEBHOOK_SECRET, timestamp = Math.floor(Date.now() / 1000)) =>
      `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${payload}`).digest('hex')}`;

    const webhook = (payload: string, signature = sign(payload)) =>
      api.request('POST', '/v1/billing/webhooks/stripe', {
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
        raw: payload,
      });

    const stripeEvent = (type: string, created: number, object: Record<string, unknown>, id?: string) =>
      JSON.stringify({
        id: id ?? `evt_abuse_${++n}_${Date.now()}`,
        object: 'event',
        type,
        created,
        data: { object },
      });

    const subscription = (tenantId: string, sub: string, status: string) => ({
      id: sub,
      object: 'subscription',
      status,
      metadata: { tenant_id: tenantId },
      items: { object: 'list', data: [{ id: 'si_abuse', price: { id: 'price_pro_abuse' } }] },
    });

    it('a forged event (another secret) answers 400 and changes nothing', async () => {
      const t = await freeTenant();
      const payload = stripeEvent(
        'customer.subscription.updated',
        T,
        subscription(t.tenantId, 'sub_forged', 'active'),
      );
      const res = await webhook(payload, sign(payload, 'whsec_attacker0000'));
      expect(res.status).toBe(400);
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(await planOf(t)).toBe('free');
    });

    it('an unpaid checkout.session.completed answers 200 and changes nothing', async () => {
      const t = await freeTenant();
      const payload = stripeEvent('checkout.session.completed', T, {
        id: 'cs_abuse_unpaid',
        object: 'checkout.session',
        client_reference_id: t.tenantId,
        metadata: { tenant_id: t.tenantId, plan_id: 'enterprise' },
        status: 'complete',
        payment_status: 'unpaid',
      });
      const res = await webhook(payload);
      expect(res.status).toBe(200);
      expect(await planOf(t)).toBe('free');
      const [hook] = await trail(t, 'billing.webhook', 1);
      expect(hook).toMatchObject({ outcome: 'denied', details: { applied: false, reason: 'not_paid' } });
    });

    it('a late updated: active after deleted answers 200 and changes nothing', async () => {
      const t = await freeTenant();
      const sub = `sub_abuse_${Date.now()}`;
      expect(
        (
          await webhook(
            stripeEvent('customer.subscription.updated', T, subscription(t.tenantId, sub, 'active')),
          )
        ).status,
      ).toBe(200);
      expect(await planOf(t)).toBe('pro');
      expect(
        (
          await webhook(
            stripeEvent('customer.subscription.deleted', T + 10, subscription(t.tenantId, sub, 'canceled')),
          )
        ).status,
      ).toBe(200);
      expect(await planOf(t)).toBe('free');

      const late = await webhook(
        stripeEvent('customer.subscription.updated', T + 5, subscription(t.tenantId, sub, 'active')),
      );
      expect(late.status).toBe(200);
      expect(await planOf(t)).toBe('free');
    });

    it('a replayed event answers 200 and changes nothing', async () => {
      const t = await freeTenant();
      const payload = stripeEvent(
        'customer.subscription.updated',
        T,
        subscription(t.tenantId, `sub_replay_${Date.now()}`, 'active'),
        `evt_abuse_replay_${Date.now()}`,
      );
      expect((await webhook(payload)).status).toBe(200);
      expect(await planOf(t)).toBe('pro');
      // The operator moves the tenant on; the old event comes again, freshly signed.
      const set = await api.request('PUT', `/admin/v1/tenants/${t.tenantId}/plan`, {
        headers: root,
        body: { plan: 'enterprise' },
      });
      expect(set.status).toBe(200);
      const replay = await webhook(payload);
      expect(replay.status).toBe(200);
      expect(replay.body).toEqual({ received: true });
      expect(await planOf(t)).toBe('enterprise');
    });
  });
});
