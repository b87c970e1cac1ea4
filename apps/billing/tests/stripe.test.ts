/**
 * The Stripe provider against a local server speaking the part of the Stripe API we use (the
 * official SDK pointed at it), and webhooks signed the way Stripe signs them. Stripe is the
 * only thing faked; PostgreSQL, Redis and the bus are real.
 */

import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import Stripe from 'stripe';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_PLANS } from '../src/domain/plans.ts';
import { type Billing, PlanChangeListener, startBilling } from './support/harness.ts';
import { type StripeApi, type StripeRequest, startStripeApi } from './support/stripe-api.ts';

const SECRET_KEY = 'sk_test_relayplane123';
const WEBHOOK_SECRET = 'whsec_relayplanetestsecret';
const BASE = 'https://relay.example.com';

/** Speaks POST /v1/checkout/sessions like Stripe; `fail` makes it answer an API error. */
class FakeStripe {
  readonly requests: StripeRequest[] = [];
  fail = false;
  #api: StripeApi | undefined;
  #n = 0;

  async start(): Promise<string> {
    this.#api = await startStripeApi((req) => {
      this.requests.push(req);
      if (req.method !== 'POST' || req.path !== '/v1/checkout/sessions') return undefined;
      if (this.fail) {
        return { status: 400, body: { error: { type: 'invalid_request_error', message: 'No such price' } } };
      }
      const { form } = req;
      const id = `cs_test_${++this.#n}`;
      return {
        body: {
          id,
          object: 'checkout.session',
          mode: form.get('mode'),
          client_reference_id: form.get('client_reference_id'),
          metadata: {
            tenant_id: form.get('metadata[tenant_id]'),
            plan_id: form.get('metadata[plan_id]'),
            checkout_session_id: form.get('metadata[checkout_session_id]'),
          },
          status: 'open',
          url: `https://checkout.stripe.test/c/pay/${id}`,
        },
      };
    });
    return this.#api.url;
  }

  async stop(): Promise<void> {
    await this.#api?.close();
  }
}

describe('Stripe provider (SDK against a local Stripe API, signed webhooks)', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let billing: Billing;
  let listener: PlanChangeListener;
  const fake = new FakeStripe();
  const clock = new ManualClock(Date.now());
  // Only for signing test payloads: generateTestHeaderString is Stripe's own signer.
  const signer = new Stripe(SECRET_KEY);
  const now = () => Math.floor(clock.now().getTime() / 1000);
  let eventN = 0;

  function sign(payload: string, options: { timestamp?: number; secret?: string } = {}): string {
    return signer.webhooks.generateTestHeaderString({
      payload,
      secret: options.secret ?? WEBHOOK_SECRET,
      timestamp: options.timestamp ?? now(),
    });
  }

  function event(type: string, object: Record<string, unknown>, id = `evt_test_${++eventN}`): string {
    return JSON.stringify({ id, object: 'event', type, created: now(), data: { object } });
  }

  async function deliver(payload: string, signature = sign(payload)) {
    return billing.client.handleWebhook({
      provider: 'stripe',
      payload: new TextEncoder().encode(payload),
      signature,
    });
  }

  async function planOf(tenantId: string): Promise<string | undefined> {
    return (await billing.client.getSubscription({ tenantId })).subscription?.planId;
  }

  /** Announcements arrive in order: once this marker's is here, any earlier one would be too. */
  async function settleAnnouncements(): Promise<void> {
    const marker = newId('tenant');
    await billing.client.setPlan({ tenantId: marker, planId: 'pro' });
    await listener.announced(marker);
  }

  beforeAll(async () => {
    const apiBase = await fake.start();
    database = await createTestDatabase('billing_stripe');
    redis = createTestRedis('billing_stripe');
    listener = await PlanChangeListener.start(redis.url, redis.prefix);
    const plans = structuredClone(DEFAULT_PLANS);
    plans.pro.stripePriceId = 'price_pro_monthly';
    plans.enterprise.stripePriceId = 'price_enterprise_monthly';
    billing = await startBilling(
      {
        BILLING_DATABASE_URL: database.url,
        BILLING_REDIS_URL: redis.url,
        BILLING_REDIS_PREFIX: redis.prefix,
        BILLING_PROVIDER: 'stripe',
        STRIPE_SECRET_KEY: SECRET_KEY,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_API_BASE: apiBase,
      },
      { plans },
      { clock },
    );
  });

  afterAll(async () => {
    await billing?.close();
    await listener?.close();
    await fake.stop();
    await redis?.clean();
    await database?.drop();
  });

  beforeEach(() => {
    fake.fail = false;
  });

  describe('checkout sessions', () => {
    it('creates a subscription-mode Stripe Checkout session with the plan price and the tenant in metadata', async () => {
      const tenantId = newId('tenant');
      const before = fake.requests.length;
      const res = await billing.client.createCheckoutSession({
        tenantId,
        planId: 'pro',
        publicBaseUrl: BASE,
      });
      const session = res.session;
      expect(fake.requests).toHaveLength(before + 1);
      const sent = fake.requests.at(-1) as StripeRequest;
      expect(sent.method).toBe('POST');
      expect(sent.path).toBe('/v1/checkout/sessions');
      expect(sent.headers.authorization).toBe(`Bearer ${SECRET_KEY}`);
      expect(sent.headers['idempotency-key']).toBe(session?.id);
      expect(sent.form.get('mode')).toBe('subscription');
      expect(sent.form.get('line_items[0][price]')).toBe('price_pro_monthly');
      expect(sent.form.get('line_items[0][quantity]')).toBe('1');
      expect(sent.form.get('client_reference_id')).toBe(tenantId);
      expect(sent.form.get('metadata[tenant_id]')).toBe(tenantId);
      expect(sent.form.get('metadata[plan_id]')).toBe('pro');
      expect(sent.form.get('metadata[checkout_session_id]')).toBe(session?.id);
      expect(sent.form.get('subscription_data[metadata][tenant_id]')).toBe(tenantId);
      expect(sent.form.get('success_url')).toBe(`${BASE}/billing/checkout/${session?.id}?result=success`);
      expect(sent.form.get('cancel_url')).toBe(`${BASE}/billing/checkout/${session?.id}?result=cancel`);
      expect(Number(sent.form.get('expires_at'))).toBe(Number(session?.expiresAt?.seconds));
      expect(session).toMatchObject({ provider: 'stripe', status: 'open', planId: 'pro', tenantId });
      expect(session?.url).toMatch(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_\d+$/);
    });

    it('calls Stripe once for the same Idempotency-Key twice and answers the same session', async () => {
      const tenantId = newId('tenant');
      const req = { tenantId, planId: 'pro', idempotencyKey: 'upgrade-42', publicBaseUrl: BASE };
      const before = fake.requests.length;
      const first = await billing.client.createCheckoutSession(req);
      const second = await billing.client.createCheckoutSession(req);
      expect(fake.requests).toHaveLength(before + 1);
      expect(second).toMatchObject({
        replayed: true,
        session: { id: first.session?.id, url: first.session?.url },
      });
    });

    it('answers internal when Stripe refuses, keeping no session, so the same key can try again', async () => {
      const tenantId = newId('tenant');
      const req = { tenantId, planId: 'pro', idempotencyKey: 'retry-me', publicBaseUrl: BASE };
      fake.fail = true;
      await expect(billing.client.createCheckoutSession(req)).rejects.toMatchObject({ code: 'internal' });
      fake.fail = false;
      const again = await billing.client.createCheckoutSession(req);
      expect(again.replayed).toBe(false);
      expect(again.session?.url).toContain('checkout.stripe.test');
    });

    it('refuses a plan without a Stripe price with invalid_request, without calling Stripe', async () => {
      const tenantId = newId('tenant');
      await billing.client.setPlan({ tenantId, planId: 'pro' });
      const before = fake.requests.length;
      await expect(
        billing.client.createCheckoutSession({ tenantId, planId: 'free', publicBaseUrl: BASE }),
      ).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringContaining('stripe_price_id'),
      });
      expect(fake.requests).toHaveLength(before);
    });

    it('does not complete a Stripe session through the built-in confirmation', async () => {
      const { session } = await billing.client.createCheckoutSession({
        tenantId: newId('tenant'),
        planId: 'pro',
        publicBaseUrl: BASE,
      });
      await expect(billing.client.completeCheckoutSession({ id: session?.id ?? '' })).rejects.toMatchObject({
        code: 'invalid_request',
      });
    });
  });

  describe('webhooks', () => {
    it('applies checkout.session.completed: plan changed, session completed, plans.changed announced', async () => {
      const tenantId = newId('tenant');
      const { session } = await billing.client.createCheckoutSession({
        tenantId,
        planId: 'pro',
        publicBaseUrl: BASE,
      });
      const sent = fake.requests.at(-1) as StripeRequest;
      const payload = event('checkout.session.completed', {
        id: `cs_test_${fake.requests.length}`,
        object: 'checkout.session',
        client_reference_id: tenantId,
        metadata: {
          tenant_id: sent.form.get('metadata[tenant_id]'),
          plan_id: sent.form.get('metadata[plan_id]'),
          checkout_session_id: sent.form.get('metadata[checkout_session_id]'),
        },
        status: 'complete',
        payment_status: 'paid',
      });
      const announced = listener.announced(tenantId);
      const res = await deliver(payload);
      await announced;
      expect(res.eventId).toMatch(/^evt_test_/);
      expect(res.duplicate).toBe(false);
      expect(await planOf(tenantId)).toBe('pro');
      expect((await billing.client.getCheckoutSession({ id: session?.id ?? '' })).session?.status).toBe(
        'completed',
      );
    });

    it('applies customer.subscription.updated by price and customer.subscription.deleted back to free', async () => {
      const tenantId = newId('tenant');
      await deliver(
        event('customer.subscription.updated', {
          id: 'sub_1',
          object: 'subscription',
          status: 'active',
          metadata: { tenant_id: tenantId, plan_id: 'pro' },
          items: { object: 'list', data: [{ id: 'si_1', price: { id: 'price_enterprise_monthly' } }] },
        }),
      );
      expect(await planOf(tenantId)).toBe('enterprise');
      const announced = listener.announced(tenantId);
      await deliver(
        event('customer.subscription.deleted', {
          id: 'sub_1',
          object: 'subscription',
          status: 'canceled',
          metadata: { tenant_id: tenantId },
        }),
      );
      await announced;
      expect(await planOf(tenantId)).toBe('free');
    });

    it('records other event types without changing anything', async () => {
      const res = await deliver(event('invoice.paid', { id: 'in_1', object: 'invoice' }));
      expect(res.eventId).toMatch(/^evt_test_/);
    });

    describe('refuses with invalid_request and changes nothing', () => {
      function upgrade(tenantId: string, id?: string): string {
        return event(
          'customer.subscription.updated',
          {
            id: 'sub_2',
            object: 'subscription',
            status: 'active',
            metadata: { tenant_id: tenantId, plan_id: 'pro' },
            items: { object: 'list', data: [{ id: 'si_2', price: { id: 'price_pro_monthly' } }] },
          },
          id,
        );
      }

      it('a forged signature (another secret)', async () => {
        const tenantId = newId('tenant');
        const payload = upgrade(tenantId);
        await expect(deliver(payload, sign(payload, { secret: 'whsec_attacker' }))).rejects.toMatchObject({
          code: 'invalid_request',
          message: 'webhook signature verification failed: the signature does not match',
        });
        await settleAnnouncements();
        expect(await planOf(tenantId)).toBe('free');
        expect(listener.received).not.toContain(tenantId);
      });

      it('a payload altered after signing', async () => {
        const tenantId = newId('tenant');
        const signature = sign(upgrade(newId('tenant'), 'evt_altered'));
        await expect(deliver(upgrade(tenantId, 'evt_altered'), signature)).rejects.toMatchObject({
          code: 'invalid_request',
        });
        expect(await planOf(tenantId)).toBe('free');
      });

      it('a stale timestamp (older than the 300 s tolerance), and one from the future', async () => {
        const tenantId = newId('tenant');
        const payload = upgrade(tenantId);
        await expect(deliver(payload, sign(payload, { timestamp: now() - 301 }))).rejects.toMatchObject({
          code: 'invalid_request',
          message: 'webhook signature verification failed: its timestamp is outside the tolerance',
        });
        await expect(deliver(payload, sign(payload, { timestamp: now() + 301 }))).rejects.toMatchObject({
          code: 'invalid_request',
          message: 'webhook signature verification failed: its timestamp is outside the tolerance',
        });
        await settleAnnouncements();
        expect(await planOf(tenantId)).toBe('free');
        expect(listener.received).not.toContain(tenantId);
        // The same event inside the tolerance is accepted: only the timestamp was wrong.
        await deliver(payload, sign(payload, { timestamp: now() - 299 }));
        expect(await planOf(tenantId)).toBe('pro');
      });

      it('a missing signature header', async () => {
        await expect(deliver(upgrade(newId('tenant')), '')).rejects.toMatchObject({
          code: 'invalid_request',
        });
      });

      it('a payload without the event fields Stripe always sends (created)', async () => {
        const tenantId = newId('tenant');
        const payload = JSON.stringify({
          id: 'evt_no_created',
          object: 'event',
          type: 'customer.subscription.deleted',
          data: { object: { id: 'sub_x', metadata: { tenant_id: tenantId } } },
        });
        await expect(deliver(payload)).rejects.toMatchObject({
          code: 'invalid_request',
          message: 'webhook payload is not a Stripe event',
        });
      });
    });

    describe('a checkout grants its plan only once paid', () => {
      async function stripeCheckout(tenantId: string) {
        const { session } = await billing.client.createCheckoutSession({
          tenantId,
          planId: 'pro',
          publicBaseUrl: BASE,
        });
        const sent = fake.requests.at(-1) as StripeRequest;
        const object = (paymentStatus: string | undefined) => ({
          id: `cs_test_${fake.requests.length}`,
          object: 'checkout.session',
          client_reference_id: tenantId,
          metadata: { tenant_id: tenantId, plan_id: 'pro', checkout_session_id: session?.id },
          status: 'complete',
          ...(paymentStatus === undefined ? {} : { payment_status: paymentStatus }),
          subscription: `sub_${sent.form.get('metadata[checkout_session_id]')?.slice(4)}`,
        });
        const status = async () =>
          (await billing.client.getCheckoutSession({ id: session?.id ?? '' })).session?.status;
        return { object, status };
      }

      it('an unpaid checkout.session.completed is answered and changes nothing; async_payment_succeeded then grants it', async () => {
        const tenantId = newId('tenant');
        const checkout = await stripeCheckout(tenantId);
        const unpaid = await deliver(event('checkout.session.completed', checkout.object('unpaid')));
        expect(unpaid.duplicate).toBe(false);
        await settleAnnouncements();
        expect(await planOf(tenantId)).toBe('free');
        expect(listener.received).not.toContain(tenantId);
        expect(await checkout.status()).toBe('open');

        const announced = listener.announced(tenantId);
        await deliver(event('checkout.session.async_payment_succeeded', checkout.object('paid')));
        await announced;
        expect(await planOf(tenantId)).toBe('pro');
        expect(await checkout.status()).toBe('completed');
      });

      it('no payment_status at all grants nothing; no_payment_required grants', async () => {
        const tenantId = newId('tenant');
        const checkout = await stripeCheckout(tenantId);
        await deliver(event('checkout.session.completed', checkout.object(undefined)));
        expect(await planOf(tenantId)).toBe('free');
        await deliver(event('checkout.session.completed', checkout.object('no_payment_required')));
        expect(await planOf(tenantId)).toBe('pro');
      });
    });

    describe('subscription events apply only when newer than the last applied one', () => {
      const T = 1_900_000_000;
      function subscriptionEvent(
        type: 'updated' | 'deleted',
        o: { sub: string; tenantId: string; created: number; id?: string; status?: string; price?: string },
      ): string {
        return JSON.stringify({
          id: o.id ?? `evt_test_${++eventN}`,
          object: 'event',
          type: `customer.subscription.${type}`,
          created: o.created,
          data: {
            object: {
              id: o.sub,
              object: 'subscription',
              status: o.status ?? (type === 'deleted' ? 'canceled' : 'active'),
              metadata: { tenant_id: o.tenantId },
              items: {
                object: 'list',
                data: [{ id: 'si_o', price: { id: o.price ?? 'price_pro_monthly' } }],
              },
            },
          },
        });
      }
      const newSub = () => `sub_${newId('tenant').slice(4)}`;

      it('a late updated: active after deleted is answered and changes nothing, as does any later event of the ended subscription', async () => {
        const tenantId = newId('tenant');
        const sub = newSub();
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T }));
        expect(await planOf(tenantId)).toBe('pro');
        await deliver(subscriptionEvent('deleted', { sub, tenantId, created: T + 10 }));
        expect(await planOf(tenantId)).toBe('free');
        const before = listener.received.filter((t) => t === tenantId).length;

        const late = await deliver(subscriptionEvent('updated', { sub, tenantId, created: T + 5 }));
        expect(late.duplicate).toBe(false);
        // Even one stamped after the deletion: Stripe never revives a deleted subscription.
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T + 20 }));
        await settleAnnouncements();
        expect(await planOf(tenantId)).toBe('free');
        expect(listener.received.filter((t) => t === tenantId)).toHaveLength(before);
      });

      it('an older update arriving after a newer one changes nothing', async () => {
        const tenantId = newId('tenant');
        const sub = newSub();
        await deliver(
          subscriptionEvent('updated', { sub, tenantId, created: T + 10, price: 'price_enterprise_monthly' }),
        );
        expect(await planOf(tenantId)).toBe('enterprise');
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T }));
        expect(await planOf(tenantId)).toBe('enterprise');
        // Unpaid falls back to free; an older active arriving after it changes nothing.
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T + 20, status: 'unpaid' }));
        expect(await planOf(tenantId)).toBe('free');
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T + 15 }));
        expect(await planOf(tenantId)).toBe('free');
        // Unpaid is not final: paying later makes it active again.
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T + 30 }));
        expect(await planOf(tenantId)).toBe('pro');
      });

      it('within the same second the greater event id wins, whichever arrives first', async () => {
        const tenantId = newId('tenant');
        const sub = newSub();
        await deliver(
          subscriptionEvent('updated', {
            sub,
            tenantId,
            created: T,
            id: `evt_b_${sub}`,
            price: 'price_enterprise_monthly',
          }),
        );
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T, id: `evt_a_${sub}` }));
        expect(await planOf(tenantId)).toBe('enterprise');
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T, id: `evt_c_${sub}` }));
        expect(await planOf(tenantId)).toBe('pro');
      });

      it('a deletion in the same second as an applied update ends it, whatever the ids', async () => {
        const tenantId = newId('tenant');
        const sub = newSub();
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T, id: `evt_z_${sub}` }));
        expect(await planOf(tenantId)).toBe('pro');
        await deliver(subscriptionEvent('deleted', { sub, tenantId, created: T, id: `evt_a_${sub}` }));
        expect(await planOf(tenantId)).toBe('free');
      });

      it('an update that decides no plan (incomplete) does not hold back the active one of the same second', async () => {
        const tenantId = newId('tenant');
        const sub = newSub();
        await deliver(
          subscriptionEvent('updated', {
            sub,
            tenantId,
            created: T,
            id: `evt_z_${sub}`,
            status: 'incomplete',
          }),
        );
        expect(await planOf(tenantId)).toBe('free');
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: T, id: `evt_a_${sub}` }));
        expect(await planOf(tenantId)).toBe('pro');
      });

      it('a paid checkout.session.completed retried after its subscription was deleted grants nothing', async () => {
        const tenantId = newId('tenant');
        const sub = newSub();
        const completed = event('checkout.session.completed', {
          id: `cs_late_${sub}`,
          object: 'checkout.session',
          metadata: { tenant_id: tenantId, plan_id: 'pro' },
          payment_status: 'paid',
          subscription: sub,
        });
        await deliver(subscriptionEvent('updated', { sub, tenantId, created: now() - 10 }));
        await deliver(subscriptionEvent('deleted', { sub, tenantId, created: now() - 5 }));
        expect(await planOf(tenantId)).toBe('free');
        await deliver(completed);
        expect(await planOf(tenantId)).toBe('free');
      });

      it('concurrent deliveries of one subscription leave the newest event applied', async () => {
        const tenantId = newId('tenant');
        const sub = newSub();
        // 8 events, delivered at once, newest last in the list but in no particular order on arrival.
        const events = Array.from({ length: 8 }, (_, i) =>
          subscriptionEvent('updated', {
            sub,
            tenantId,
            created: T + i,
            price: i % 2 === 0 ? 'price_enterprise_monthly' : 'price_pro_monthly',
          }),
        );
        const results = await Promise.all([...events].reverse().map((e) => deliver(e)));
        expect(results.every((r) => r.duplicate === false)).toBe(true);
        // The newest (i = 7) is pro.
        expect(await planOf(tenantId)).toBe('pro');
        const [order] = (
          await billing.service.database.db
            .selectFrom('stripe_subscriptions')
            .select(['last_event_at', 'ended'])
            .where('subscription_id', '=', sub)
            .execute()
        ).map((r) => ({ at: r.last_event_at.getTime(), ended: r.ended }));
        expect(order).toEqual({ at: (T + 7) * 1000, ended: false });
      });
    });

    it('answers a replayed event id as a duplicate, even with a fresh valid signature, changing nothing', async () => {
      const tenantId = newId('tenant');
      const id = `evt_replay_${newId('tenant')}`;
      const payload = JSON.stringify({
        id,
        object: 'event',
        type: 'customer.subscription.updated',
        created: now(),
        data: {
          object: {
            id: `sub_${newId('tenant').slice(4)}`,
            object: 'subscription',
            status: 'active',
            metadata: { tenant_id: tenantId },
            items: { object: 'list', data: [{ id: 'si_r', price: { id: 'price_pro_monthly' } }] },
          },
        },
      });
      expect(await deliver(payload)).toMatchObject({ eventId: id, duplicate: false });
      expect(await planOf(tenantId)).toBe('pro');
      await billing.client.setPlan({ tenantId, planId: 'enterprise' });
      clock.advance(60_000);
      // The set plan's own announcement arrives first (pub/sub is asynchronous; under load it
      // came after the count and was taken for the replay's).
      await settleAnnouncements();
      const before = listener.received.filter((t) => t === tenantId).length;
      expect(await deliver(payload)).toMatchObject({ eventId: id, duplicate: true });
      await settleAnnouncements();
      expect(await planOf(tenantId)).toBe('enterprise');
      expect(listener.received.filter((t) => t === tenantId)).toHaveLength(before);
    });
  });
});
