/**
 * Billing's audit events (docs/audit.md): each change commits with its outbox row and is
 * delivered to admin's RecordAuditEvents — here a real gRPC server recording into PostgreSQL
 * (@relayplane/testing/recording-admin); tests/e2e/audit-outbox.test.ts runs them into admin.
 * Stripe's webhooks are signed with Stripe's own signer; nothing else is faked.
 */

import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import { sampleValue } from '@relayplane/testing/metrics';
import {
  type RecordedEvent,
  type RecordingAdmin,
  startRecordingAdmin,
} from '@relayplane/testing/recording-admin';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PLANS } from '../src/domain/plans.ts';
import { BAD_SIGNATURE_WINDOW_MS } from '../src/providers/bad-signatures.ts';
import { type Billing, startBilling } from './support/harness.ts';

const WEBHOOK_SECRET = 'whsec_relayplaneaudittest';
const REQUEST = {
  requestId: 'req-billing-audit',
  clientIp: '192.0.2.44',
  userAgent: 'Mozilla/5.0 (audit test)',
  actor: { type: 'user' as const, id: 'usr_0123456789abcdefghjk' },
};

describe('billing audit events through the outbox (real gRPC, real PostgreSQL)', () => {
  let database: TestDatabase;
  let admin: RecordingAdmin;
  let builtin: Billing;
  let stripe: Billing;
  const signer = new Stripe('sk_test_relayplaneaudit');

  async function delivered(
    match: (e: RecordedEvent) => boolean,
    count = 1,
    timeoutMs = 2_000,
  ): Promise<RecordedEvent[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const events = (await admin.events()).filter(match);
      if (events.length >= count) return events;
      if (Date.now() > deadline)
        throw new Error(`${events.length} of ${count} events within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  const forTenant = (tenantId: string, action: string) => (e: RecordedEvent) =>
    e.tenantId === tenantId && e.action === action;

  async function rejection(promise: Promise<unknown>): Promise<AppError> {
    try {
      await promise;
    } catch (err) {
      expect(err).toBeInstanceOf(AppError);
      return err as AppError;
    }
    throw new Error('expected the call to fail');
  }

  function webhook(type: string, object: Record<string, unknown>, id = `evt_${newId('session').slice(4)}`) {
    const payload = JSON.stringify({
      id,
      object: 'event',
      type,
      created: Math.floor(Date.now() / 1000),
      data: { object },
    });
    return {
      id,
      payload,
      signature: signer.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET }),
    };
  }
  const deliver = (w: { payload: string; signature: string }) =>
    stripe.client.handleWebhook({
      provider: 'stripe',
      payload: new TextEncoder().encode(w.payload),
      signature: w.signature,
    });

  beforeAll(async () => {
    database = await createTestDatabase('billing_audit');
    admin = await startRecordingAdmin(database.url);
    builtin = await startBilling({
      BILLING_DATABASE_URL: database.url,
      BILLING_ADMIN_ADDRESS: admin.address,
      BILLING_BUILTIN_PAID_CHECKOUT: 'true',
    });
    const plans = structuredClone(DEFAULT_PLANS);
    plans.pro.stripePriceId = 'price_pro_monthly';
    // A second billing (its own schema's outbox in another database would do too): the Stripe provider.
    const stripeDb = await createTestDatabase('billing_audit_stripe');
    cleanup.push(() => stripeDb.drop());
    stripe = await startBilling(
      {
        BILLING_DATABASE_URL: stripeDb.url,
        BILLING_ADMIN_ADDRESS: admin.address,
        BILLING_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: 'sk_test_relayplaneaudit',
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      },
      { plans },
    );
  });

  const cleanup: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await builtin?.close();
    await stripe?.close();
    await admin?.close();
    for (const step of cleanup) await step();
    await database?.drop();
  });

  it('records plan.change from SetPlan with from, to, cause and the caller', async () => {
    const tenantId = newId('tenant');
    await runWithRequestContext(REQUEST, () => builtin.client.setPlan({ tenantId, planId: 'pro' }));
    const [event] = await delivered(forTenant(tenantId, 'plan.change'));
    expect(event).toMatchObject({
      source: 'billing',
      actor: REQUEST.actor,
      target: { type: 'tenant', id: tenantId },
      outcome: 'success',
      ip: REQUEST.clientIp,
      userAgent: REQUEST.userAgent,
      requestId: REQUEST.requestId,
      details: { from: 'free', to: 'pro', cause: 'set_plan' },
    });
    // Setting the plan the tenant has changes nothing and records nothing.
    await builtin.client.setPlan({ tenantId, planId: 'pro' });
    await builtin.client.setPlan({ tenantId, planId: 'enterprise' });
    const changes = await delivered(forTenant(tenantId, 'plan.change'), 2);
    expect(changes.map((e) => e.details)).toEqual([
      { from: 'free', to: 'pro', cause: 'set_plan' },
      { from: 'pro', to: 'enterprise', cause: 'set_plan' },
    ]);
  });

  it('records checkout.create, then checkout.confirm with its plan.change (cause checkout)', async () => {
    const tenantId = newId('tenant');
    const created = await runWithRequestContext(REQUEST, () =>
      builtin.client.createCheckoutSession({
        tenantId,
        planId: 'pro',
        publicBaseUrl: 'https://relay.example.com',
      }),
    );
    const id = created.session?.id ?? '';
    const [create] = await delivered(forTenant(tenantId, 'checkout.create'));
    expect(create).toMatchObject({
      actor: REQUEST.actor,
      target: { type: 'checkout_session', id },
      details: { plan_id: 'pro', provider: 'builtin' },
    });
    await runWithRequestContext(REQUEST, () => builtin.client.completeCheckoutSession({ id }));
    const [confirm] = await delivered(forTenant(tenantId, 'checkout.confirm'));
    expect(confirm).toMatchObject({ actor: REQUEST.actor, target: { type: 'checkout_session', id } });
    const [change] = await delivered(forTenant(tenantId, 'plan.change'));
    expect(change?.details).toEqual({ from: 'free', to: 'pro', cause: 'checkout' });
    // Confirming again changes nothing: no second event.
    await builtin.client.completeCheckoutSession({ id });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await admin.events()).filter(forTenant(tenantId, 'checkout.confirm'))).toHaveLength(1);
  });

  it('refuses a plan change and a checkout confirmation with 503 + Retry-After, changing nothing, when the outbox row cannot be written', async () => {
    const tenantId = newId('tenant');
    const created = await builtin.client.createCheckoutSession({
      tenantId,
      planId: 'enterprise',
      publicBaseUrl: 'https://relay.example.com',
    });
    const db = builtin.service.database.db;
    await sql`create function billing.refuse_audit() returns trigger language plpgsql as $$ begin raise exception 'audit outbox refused (test)'; end $$`.execute(
      db,
    );
    await sql`create trigger refuse_audit before insert on billing.audit_outbox for each row execute function billing.refuse_audit()`.execute(
      db,
    );
    try {
      const err = await rejection(builtin.client.setPlan({ tenantId, planId: 'pro' }));
      expect(err.code).toBe('unavailable');
      expect(err.httpStatus).toBe(503);
      expect(err.retryAfterSeconds).toBeGreaterThan(0);
      expect((await builtin.client.getSubscription({ tenantId })).subscription?.planId ?? 'free').toBe(
        'free',
      );
      const confirm = await rejection(
        builtin.client.completeCheckoutSession({ id: created.session?.id ?? '' }),
      );
      expect(confirm.code).toBe('unavailable');
      expect(
        (await builtin.client.getCheckoutSession({ id: created.session?.id ?? '' })).session?.status,
      ).toBe('open');
      expect((await builtin.client.getSubscription({ tenantId })).subscription?.planId ?? 'free').toBe(
        'free',
      );
      const create = await rejection(
        builtin.client.createCheckoutSession({
          tenantId,
          planId: 'pro',
          publicBaseUrl: 'https://relay.example.com',
        }),
      );
      expect(create.code).toBe('unavailable');
      const sessions =
        await sql`select id from billing.checkout_sessions where tenant_id = ${tenantId}`.execute(db);
      expect(sessions.rows).toHaveLength(1);
    } finally {
      await sql`drop trigger refuse_audit on billing.audit_outbox`.execute(db);
      await sql`drop function billing.refuse_audit()`.execute(db);
    }
    expect(
      (await admin.events()).filter((e) => e.tenantId === tenantId && e.action !== 'checkout.create'),
    ).toEqual([]);
  });

  it('records billing.webhook (event id and type, no payload or signature) with the plan.change it applies', async () => {
    const tenantId = newId('tenant');
    const w = webhook('customer.subscription.updated', {
      id: 'sub_1',
      object: 'subscription',
      status: 'active',
      metadata: { tenant_id: tenantId, plan_id: 'pro' },
      items: { data: [{ price: { id: 'price_pro_monthly' } }] },
    });
    await deliver(w);
    const [hook] = await delivered(forTenant(tenantId, 'billing.webhook'));
    expect(hook).toMatchObject({
      source: 'billing',
      outcome: 'success',
      target: { type: 'stripe_event', id: w.id },
      details: { provider: 'stripe', event_id: w.id, type: 'customer.subscription.updated', applied: true },
    });
    const text = JSON.stringify(hook);
    expect(text).not.toContain(w.signature);
    expect(text).not.toContain('sub_1');
    const [change] = await delivered(forTenant(tenantId, 'plan.change'));
    expect(change?.details).toEqual({ from: 'free', to: 'pro', cause: 'stripe_webhook' });
  });

  it('records an unpaid checkout and an out-of-order subscription event as denied, not applied, with the reason', async () => {
    const tenantId = newId('tenant');
    const unpaid = webhook('checkout.session.completed', {
      id: 'cs_unpaid',
      object: 'checkout.session',
      metadata: { tenant_id: tenantId, plan_id: 'pro' },
      payment_status: 'unpaid',
    });
    expect(await deliver(unpaid)).toMatchObject({ duplicate: false });
    const sub = { id: 'sub_order', object: 'subscription', metadata: { tenant_id: tenantId } };
    const deleted = webhook('customer.subscription.deleted', { ...sub, status: 'canceled' });
    await deliver(deleted);
    const late = webhook('customer.subscription.updated', {
      ...sub,
      status: 'active',
      items: { data: [{ price: { id: 'price_pro_monthly' } }] },
    });
    await deliver(late);
    const hooks = await delivered(forTenant(tenantId, 'billing.webhook'), 3);
    expect(hooks.map((e) => [e.target.id, e.outcome, e.details.applied, e.details.reason])).toEqual([
      [unpaid.id, 'denied', false, 'not_paid'],
      [deleted.id, 'success', true, undefined],
      [late.id, 'denied', false, 'stale'],
    ]);
    expect(hooks[0]?.details).toMatchObject({ payment_status: 'unpaid' });
    // The deletion found the tenant on free already: no plan change, so none recorded.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await admin.events()).filter(forTenant(tenantId, 'plan.change'))).toEqual([]);
  });

  it('aggregates bad signatures per client (an IPv6 /64) and window: one audit event per window, carrying the count of the window before (issue 31)', async () => {
    const clock = new ManualClock(Date.parse('2026-03-02T10:00:00Z'));
    const db = await createTestDatabase('billing_audit_bad_signatures');
    cleanup.push(() => db.drop());
    const plans = structuredClone(DEFAULT_PLANS);
    plans.pro.stripePriceId = 'price_pro_monthly';
    const billing = await startBilling(
      {
        BILLING_DATABASE_URL: db.url,
        BILLING_ADMIN_ADDRESS: admin.address,
        BILLING_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: 'sk_test_relayplaneaudit',
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      },
      { plans },
      { clock },
    );
    try {
      const forged = webhook('customer.subscription.deleted', { id: 'sub_3', metadata: {} });
      const bad = forged.signature.replace(/v1=[0-9a-f]{4}/, 'v1=ffff');
      const from = async (clientIp: string) => {
        const err = await runWithRequestContext({ requestId: `req-${clientIp}`, clientIp }, () =>
          rejection(
            billing.client.handleWebhook({
              provider: 'stripe',
              payload: new TextEncoder().encode(forged.payload),
              signature: bad,
            }),
          ),
        );
        expect(err.code).toBe('invalid_request');
      };
      const network = '2001:db8:77:1:0:0:0:0/64';
      const of = (client: string) => (e: RecordedEvent) =>
        e.action === 'billing.webhook' && e.outcome === 'failure' && e.details.client === client;
      /** Waits for a refusal of a client seen only here: the outbox delivers oldest first, so every event written before it has arrived. */
      const settled = async (sentinel: string) => {
        await from(sentinel);
        await delivered(of(sentinel));
      };

      // Window 1: 20 from one /64 (20 addresses), 5 from one IPv4 address.
      for (let i = 1; i <= 20; i++) await from(`2001:db8:77:1::${i.toString(16)}`);
      for (let i = 0; i < 5; i++) await from('203.0.113.99');
      await settled('198.51.100.1');
      let events = await admin.events();
      expect(events.filter(of(network)).map((e) => e.details)).toEqual([
        {
          provider: 'stripe',
          reason: expect.stringMatching(/signature/i),
          client: network,
          window_seconds: BAD_SIGNATURE_WINDOW_MS / 1000,
          refused_previous_window: 0,
        },
      ]);
      expect(events.filter(of('203.0.113.99'))).toHaveLength(1);

      // Window 2: the first refusal of the /64 records the 20 of window 1; the rest record nothing.
      clock.advance(BAD_SIGNATURE_WINDOW_MS);
      for (let i = 0; i < 7; i++) await from('2001:db8:77:1::ab');
      await settled('198.51.100.2');
      events = await admin.events();
      expect(events.filter(of(network)).map((e) => e.details.refused_previous_window)).toEqual([0, 20]);
      expect(events.filter(of('203.0.113.99'))).toHaveLength(1);

      // Window 3: the 7 of window 2.
      clock.advance(BAD_SIGNATURE_WINDOW_MS);
      await from('2001:db8:77:1::1');
      await settled('198.51.100.3');
      expect(
        (await admin.events()).filter(of(network)).map((e) => e.details.refused_previous_window),
      ).toEqual([0, 20, 7]);
      const scraped = await billing.service.metrics.metrics();
      expect(sampleValue(scraped, 'relayplane_billing_webhook_bad_signatures_total')).toBe(
        20 + 5 + 7 + 1 + 3,
      );
    } finally {
      await billing.close();
    }
  });

  it('aggregates bad signatures across replicas sharing Redis: concurrent refusals on two billings write one event per client and window (issue 31)', async () => {
    const clock = new ManualClock(Date.parse('2026-03-02T10:00:00Z'));
    const db = await createTestDatabase('billing_audit_bad_signatures_redis');
    cleanup.push(() => db.drop());
    const redis = createTestRedis('billing_audit_bad_signatures');
    cleanup.push(() => redis.clean());
    const plans = structuredClone(DEFAULT_PLANS);
    plans.pro.stripePriceId = 'price_pro_monthly';
    const env = {
      BILLING_DATABASE_URL: db.url,
      BILLING_ADMIN_ADDRESS: admin.address,
      BILLING_REDIS_URL: redis.url,
      BILLING_REDIS_PREFIX: redis.prefix,
      BILLING_PROVIDER: 'stripe',
      STRIPE_SECRET_KEY: 'sk_test_relayplaneaudit',
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    };
    const replicas = [
      await startBilling(env, { plans }, { clock }),
      await startBilling(env, { plans }, { clock }),
    ];
    try {
      const forged = webhook('customer.subscription.deleted', { id: 'sub_4', metadata: {} });
      const bad = forged.signature.replace(/v1=[0-9a-f]{4}/, 'v1=eeee');
      const from = (replica: Billing, clientIp: string) =>
        runWithRequestContext({ requestId: `req-${clientIp}`, clientIp }, () =>
          rejection(
            replica.client.handleWebhook({
              provider: 'stripe',
              payload: new TextEncoder().encode(forged.payload),
              signature: bad,
            }),
          ),
        );
      const of = (client: string) => (e: RecordedEvent) =>
        e.action === 'billing.webhook' && e.outcome === 'failure' && e.details.client === client;
      const burst = (n: number) =>
        Promise.all(Array.from({ length: n }, (_, i) => from(replicas[i % 2] as Billing, '198.51.100.77')));
      const settled = async (sentinel: string) => {
        await from(replicas[0] as Billing, sentinel);
        await delivered(of(sentinel));
      };

      for (const err of await burst(20)) expect(err.code).toBe('invalid_request');
      await settled('198.51.100.10');
      expect((await admin.events()).filter(of('198.51.100.77'))).toHaveLength(1);

      clock.advance(BAD_SIGNATURE_WINDOW_MS);
      await burst(6);
      await settled('198.51.100.11');
      expect(
        (await admin.events()).filter(of('198.51.100.77')).map((e) => e.details.refused_previous_window),
      ).toEqual([0, 20]);
    } finally {
      for (const replica of replicas) await replica.close();
    }
  });

  it('records a bad signature with outcome failure, and a replay (answered, nothing changed) as denied', async () => {
    const forged = webhook('customer.subscription.deleted', { id: 'sub_2', metadata: {} });
    const badSignature = forged.signature.replace(/v1=[0-9a-f]{4}/, 'v1=0000');
    expect((await rejection(deliver({ payload: forged.payload, signature: badSignature }))).code).toBe(
      'invalid_request',
    );
    const [refused] = await delivered(
      (e) => e.action === 'billing.webhook' && e.outcome === 'failure' && e.target.id === '',
    );
    expect(refused?.details).toMatchObject({
      provider: 'stripe',
      reason: expect.stringContaining('signature'),
    });
    expect(JSON.stringify(refused)).not.toContain(badSignature);
    expect(JSON.stringify(refused)).not.toContain(WEBHOOK_SECRET);

    const once = webhook('invoice.paid', { id: 'in_1' });
    expect(await deliver(once)).toMatchObject({ eventId: once.id, duplicate: false });
    expect(await deliver(once)).toMatchObject({ eventId: once.id, duplicate: true });
    const replay = await delivered((e) => e.action === 'billing.webhook' && e.target.id === once.id, 2);
    expect(replay.map((e) => e.outcome)).toEqual(['success', 'denied']);
    expect(replay[1]?.details).toMatchObject({
      event_id: once.id,
      type: 'invoice.paid',
      applied: false,
      reason: 'replay',
    });
  });
});
