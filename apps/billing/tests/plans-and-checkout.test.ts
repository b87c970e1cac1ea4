import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { MemoryBus } from '@relayplane/shared/bus';
import { ManualClock } from '@relayplane/shared/clock';
import type { FallbackRateLimiter } from '@relayplane/shared/rate-limit';
import { MemoryScheduler } from '@relayplane/shared/scheduler';
import { testLogger } from '@relayplane/testing/logger';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Billing, PlanChangeListener, startBilling } from './support/harness.ts';

const BASE = 'https://relay.example.com';

describe('plans, entitlements and built-in checkout with paid checkout on (real PostgreSQL and Redis)', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let billing: Billing;
  let listener: PlanChangeListener;
  const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));

  beforeAll(async () => {
    database = await createTestDatabase('billing_checkout');
    redis = createTestRedis('billing_checkout');
    listener = await PlanChangeListener.start(redis.url, redis.prefix);
    billing = await startBilling(
      {
        BILLING_DATABASE_URL: database.url,
        BILLING_REDIS_URL: redis.url,
        BILLING_REDIS_PREFIX: redis.prefix,
        BILLING_CHECKOUT_MAX_PER_WINDOW: '3',
        BILLING_CHECKOUT_WINDOW_SECONDS: '60',
        // Checkout of paid plans as a demo allows it (tests/builtin-paid-checkout.test.ts: off).
        BILLING_BUILTIN_PAID_CHECKOUT: 'true',
      },
      {},
      { clock },
    );
  });

  afterAll(async () => {
    await billing?.close();
    await listener?.close();
    await redis?.clean();
    await database?.drop();
  });

  describe('GetEntitlements', () => {
    it('answers the free plan for a tenant without a subscription, with codes and messages naming limit and plan', async () => {
      const res = await billing.client.getEntitlements({ tenantId: newId('tenant') });
      expect(res.planId).toBe('free');
      expect(res.planName).toBe('Free');
      const byLimit = new Map(res.entitlements.map((e) => [e.limit, e]));
      expect(byLimit.get('max_api_keys')).toMatchObject({
        value: 2,
        exceededCode: 'payment_required',
        exceededMessage:
          'the free plan allows at most 2 active API keys (max_api_keys); upgrade the plan to create more',
      });
      expect(byLimit.get('max_projects')).toMatchObject({ value: 2, exceededCode: 'unprocessable' });
      expect(byLimit.get('max_concurrent_connections')).toMatchObject({
        value: 10,
        exceededCode: 'payment_required',
      });
      expect(byLimit.get('max_issuance_per_second_per_key')).toMatchObject({
        value: 20,
        exceededCode: 'rate_limited',
      });
      expect(byLimit.get('max_webhook_endpoints')).toMatchObject({
        value: 2,
        exceededCode: 'unprocessable',
        exceededMessage:
          'the free plan allows at most 2 webhook endpoints per project (max_webhook_endpoints); upgrade the plan to add more',
      });
      expect(byLimit.size).toBe(8);
    });

    it("follows the tenant's plan", async () => {
      const tenantId = newId('tenant');
      await billing.client.setPlan({ tenantId, planId: 'pro' });
      const res = await billing.client.getEntitlements({ tenantId });
      expect(res.planId).toBe('pro');
      const projects = res.entitlements.find((e) => e.limit === 'max_projects');
      expect(projects?.value).toBe(25);
      expect(projects?.exceededMessage).toContain('the pro plan allows at most 25 projects (max_projects)');
    });

    it('refuses a malformed tenant id with invalid_request', async () => {
      await expect(billing.client.getEntitlements({ tenantId: 'nope' })).rejects.toMatchObject({
        code: 'invalid_request',
      });
    });
  });

  describe('SetPlan', () => {
    it('announces the change on the Redis bus (plans.changed, payload the tenant id)', async () => {
      const tenantId = newId('tenant');
      const announced = listener.announced(tenantId);
      await billing.client.setPlan({ tenantId, planId: 'enterprise' });
      await announced;
      expect(listener.received).toContain(tenantId);
    });

    it('refuses an unknown plan with invalid_request, storing and announcing nothing', async () => {
      const tenantId = newId('tenant');
      await expect(billing.client.setPlan({ tenantId, planId: 'platinum' })).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringContaining('platinum'),
      });
      // Announcements arrive in order: once a later one is here, an earlier one would be too.
      const marker = newId('tenant');
      await billing.client.setPlan({ tenantId: marker, planId: 'pro' });
      await listener.announced(marker);
      expect(listener.received).not.toContain(tenantId);
      expect((await billing.client.getSubscription({ tenantId })).subscription?.planId).toBe('free');
    });
  });

  describe('CreateCheckoutSession (built-in provider)', () => {
    it('creates an open session whose url is the gateway checkout page', async () => {
      const tenantId = newId('tenant');
      const res = await billing.client.createCheckoutSession({
        tenantId,
        planId: 'pro',
        publicBaseUrl: `${BASE}/`,
      });
      const session = res.session;
      expect(res.replayed).toBe(false);
      expect(session?.id).toMatch(/^cks_[0-9a-z]{20}$/);
      expect(session).toMatchObject({ tenantId, planId: 'pro', provider: 'builtin', status: 'open' });
      expect(session?.url).toBe(`${BASE}/billing/checkout/${session?.id}`);
      expect(Number(session?.expiresAt?.seconds) - Number(session?.createdAt?.seconds)).toBe(86_400);
      const read = await billing.client.getCheckoutSession({ id: session?.id ?? '' });
      expect(read.session).toMatchObject({ id: session?.id, status: 'open', url: session?.url });
    });

    it('answers the stored session for the same Idempotency-Key, creating one session', async () => {
      const tenantId = newId('tenant');
      const req = { tenantId, planId: 'pro', idempotencyKey: 'order-1', publicBaseUrl: BASE };
      const first = await billing.client.createCheckoutSession(req);
      const second = await billing.client.createCheckoutSession(req);
      expect(first.replayed).toBe(false);
      expect(second.replayed).toBe(true);
      expect(second.session?.id).toBe(first.session?.id);
      const rows = await billing.service.database.db
        .selectFrom('checkout_sessions')
        .select('id')
        .where('tenant_id', '=', tenantId)
        .execute();
      expect(rows).toHaveLength(1);
      // Another key is another session; the same key for another plan is refused.
      const other = await billing.client.createCheckoutSession({ ...req, idempotencyKey: 'order-2' });
      expect(other.session?.id).not.toBe(first.session?.id);
      await expect(
        billing.client.createCheckoutSession({ ...req, planId: 'enterprise' }),
      ).rejects.toMatchObject({ code: 'conflict' });
    });

    it('throttles a burst from one tenant with rate_limited and a retry hint, leaving another tenant unaffected', async () => {
      const noisy = newId('tenant');
      const quiet = newId('tenant');
      const results = await Promise.allSettled(
        Array.from({ length: 6 }, () =>
          billing.client.createCheckoutSession({ tenantId: noisy, planId: 'pro', publicBaseUrl: BASE }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(refused).toHaveLength(3);
      for (const r of refused) {
        expect(r.reason).toBeInstanceOf(AppError);
        expect(r.reason).toMatchObject({ code: 'rate_limited' });
        expect((r.reason as AppError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
        expect((r.reason as AppError).retryAfterSeconds).toBeLessThanOrEqual(60);
      }
      await expect(
        billing.client.createCheckoutSession({ tenantId: quiet, planId: 'pro', publicBaseUrl: BASE }),
      ).resolves.toMatchObject({ session: { tenantId: quiet } });
      // The window lives in Redis (shared by every replica), under the deployment's prefix.
      const r = new Redis(redis.url);
      try {
        const key = `${redis.prefix}billing:throttle:checkout:${noisy}`;
        expect(await r.get(key)).toBe('6');
        expect(await r.pttl(key)).toBeGreaterThan(0);
      } finally {
        r.disconnect();
      }
    });

    it('does not throttle replays of an Idempotency-Key', async () => {
      const tenantId = newId('tenant');
      const req = { tenantId, planId: 'pro', idempotencyKey: 'again', publicBaseUrl: BASE };
      const first = await billing.client.createCheckoutSession(req);
      for (let i = 0; i < 5; i++) {
        const replay = await billing.client.createCheckoutSession(req);
        expect(replay).toMatchObject({ replayed: true, session: { id: first.session?.id } });
      }
    });

    it('refuses an unknown plan, the current plan, a bad key and a bad base URL', async () => {
      const tenantId = newId('tenant');
      await expect(
        billing.client.createCheckoutSession({ tenantId, planId: 'gold', publicBaseUrl: BASE }),
      ).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringContaining('gold') });
      await expect(
        billing.client.createCheckoutSession({ tenantId, planId: 'free', publicBaseUrl: BASE }),
      ).rejects.toMatchObject({ code: 'conflict', message: 'the tenant is already on the free plan' });
      await expect(
        billing.client.createCheckoutSession({
          tenantId,
          planId: 'pro',
          idempotencyKey: 'a b',
          publicBaseUrl: BASE,
        }),
      ).rejects.toMatchObject({ code: 'invalid_request' });
      await expect(
        billing.client.createCheckoutSession({ tenantId, planId: 'pro', publicBaseUrl: 'ftp://x' }),
      ).rejects.toMatchObject({ code: 'invalid_request' });
    });
  });

  describe('CompleteCheckoutSession (built-in provider)', () => {
    it('moves the tenant to the plan, announces it, and answers a repeat without a second change', async () => {
      const tenantId = newId('tenant');
      const { session } = await billing.client.createCheckoutSession({
        tenantId,
        planId: 'pro',
        publicBaseUrl: BASE,
      });
      const id = session?.id ?? '';
      const announced = listener.announced(tenantId);
      const done = await billing.client.completeCheckoutSession({ id });
      await announced;
      expect(done.session?.status).toBe('completed');
      expect(done.subscription).toMatchObject({ tenantId, planId: 'pro' });
      expect((await billing.client.getEntitlements({ tenantId })).planId).toBe('pro');
      const again = await billing.client.completeCheckoutSession({ id });
      expect(again.session?.status).toBe('completed');
      expect(again.subscription?.planId).toBe('pro');
      expect(listener.received.filter((t) => t === tenantId)).toHaveLength(1);
    });

    it('refuses an expired session with invalid_request and an unknown one with not_found', async () => {
      const tenantId = newId('tenant');
      const { session } = await billing.client.createCheckoutSession({
        tenantId,
        planId: 'pro',
        publicBaseUrl: BASE,
      });
      clock.advance(86_400_000);
      try {
        await expect(billing.client.getCheckoutSession({ id: session?.id ?? '' })).resolves.toMatchObject({
          session: { status: 'expired' },
        });
        await expect(billing.client.completeCheckoutSession({ id: session?.id ?? '' })).rejects.toMatchObject(
          {
            code: 'invalid_request',
            message: 'this checkout session has expired; start a new one',
          },
        );
      } finally {
        clock.advance(-86_400_000);
      }
      expect((await billing.client.getSubscription({ tenantId })).subscription?.planId).toBe('free');
      await expect(
        billing.client.completeCheckoutSession({ id: newId('checkoutSession') }),
      ).rejects.toMatchObject({
        code: 'not_found',
      });
      await expect(billing.client.completeCheckoutSession({ id: 'nope' })).rejects.toMatchObject({
        code: 'not_found',
      });
    });
  });

  it('refuses Stripe webhooks when the provider is built-in', async () => {
    await expect(
      billing.client.handleWebhook({ provider: 'stripe', payload: new Uint8Array(), signature: '' }),
    ).rejects.toMatchObject({ code: 'invalid_request' });
  });
});

describe('checkout throttle while Redis is down', () => {
  let database: TestDatabase;
  let billing: Billing;

  beforeAll(async () => {
    database = await createTestDatabase('billing_noredis');
    const logger = testLogger('billing');
    billing = await startBilling(
      {
        BILLING_DATABASE_URL: database.url,
        // Nothing listens here: every throttle command fails at once.
        BILLING_REDIS_URL: 'redis://127.0.0.1:1',
        BILLING_CHECKOUT_MAX_PER_WINDOW: '2',
        BILLING_BUILTIN_PAID_CHECKOUT: 'true',
      },
      {},
      { bus: new MemoryBus(), scheduler: new MemoryScheduler(logger) },
    );
  });

  afterAll(async () => {
    await billing?.close();
    await database?.drop();
  });

  it('still limits each tenant per process, never unlimited', async () => {
    const tenantId = newId('tenant');
    const create = () =>
      billing.client.createCheckoutSession({ tenantId, planId: 'pro', publicBaseUrl: BASE });
    await create();
    await create();
    await expect(create()).rejects.toMatchObject({ code: 'rate_limited' });
    expect((billing.service.checkoutThrottle as FallbackRateLimiter).degraded).toBe(true);
    await expect(
      billing.client.createCheckoutSession({ tenantId: newId('tenant'), planId: 'pro', publicBaseUrl: BASE }),
    ).resolves.toMatchObject({ replayed: false });
  });
});
