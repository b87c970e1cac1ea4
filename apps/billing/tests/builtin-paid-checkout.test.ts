/**
 * No free upgrades (issue 18): the built-in provider takes no payment, so while
 * `BILLING_BUILTIN_PAID_CHECKOUT` is off (the default) it neither creates nor completes a
 * checkout of a paid plan, and records each refusal in the audit trail. Real gRPC, real
 * PostgreSQL, and a real RecordAuditEvents server for the outbox.
 */
import { newId } from '@relayplane/contract/ids';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import {
  type RecordedEvent,
  type RecordingAdmin,
  startRecordingAdmin,
} from '@relayplane/testing/recording-admin';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Billing, startBilling } from './support/harness.ts';

const BASE = 'https://relay.example.com';
const REQUEST = {
  requestId: 'req-paid-checkout',
  clientIp: '192.0.2.18',
  userAgent: 'paid-checkout test',
  actor: { type: 'user' as const, id: 'usr_0123456789abcdefghjk' },
};

describe('built-in checkout of paid plans is off by default (real gRPC, PostgreSQL, audit outbox)', () => {
  let database: TestDatabase;
  let admin: RecordingAdmin;
  /** The default configuration: paid checkout off. */
  let off: Billing;
  /** Another replica of the same deployment, on the same schema, started with paid checkout on. */
  let on: Billing;

  async function delivered(match: (e: RecordedEvent) => boolean, count = 1): Promise<RecordedEvent[]> {
    const deadline = Date.now() + 2_000;
    for (;;) {
      const events = (await admin.events()).filter(match);
      if (events.length >= count) return events;
      if (Date.now() > deadline) throw new Error(`${events.length} of ${count} events within 2 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  const planOf = async (tenantId: string) =>
    (await off.client.getSubscription({ tenantId })).subscription?.planId;

  const sessionsOf = (tenantId: string) =>
    off.service.database.db
      .selectFrom('checkout_sessions')
      .select(['id', 'plan_id', 'status'])
      .where('tenant_id', '=', tenantId)
      .execute();

  beforeAll(async () => {
    database = await createTestDatabase('billing_paid_checkout');
    admin = await startRecordingAdmin(database.url);
    const env = {
      BILLING_DATABASE_URL: database.url,
      BILLING_ADMIN_ADDRESS: admin.address,
      BILLING_CHECKOUT_MAX_PER_WINDOW: '3',
    };
    off = await startBilling(env);
    on = await startBilling({ ...env, BILLING_BUILTIN_PAID_CHECKOUT: 'true' });
  });

  afterAll(async () => {
    await off?.close();
    await on?.close();
    await admin?.close();
    await database?.drop();
  });

  it('refuses a checkout of pro and of enterprise with unprocessable naming the setting, storing no session', async () => {
    const tenantId = newId('tenant');
    for (const planId of ['pro', 'enterprise']) {
      await expect(
        runWithRequestContext(REQUEST, () =>
          off.client.createCheckoutSession({ tenantId, planId, publicBaseUrl: BASE }),
        ),
      ).rejects.toMatchObject({
        code: 'unprocessable',
        message: expect.stringMatching(
          new RegExp(`^checkout of the paid ${planId} plan is off: .*BILLING_BUILTIN_PAID_CHECKOUT=true`),
        ),
      });
    }
    expect(await sessionsOf(tenantId)).toEqual([]);
    expect(await planOf(tenantId)).toBe('free');
  });

  it('records each refusal as a denied checkout.create with the plan, the provider and the reason', async () => {
    const tenantId = newId('tenant');
    await expect(
      runWithRequestContext(REQUEST, () =>
        off.client.createCheckoutSession({ tenantId, planId: 'enterprise', publicBaseUrl: BASE }),
      ),
    ).rejects.toMatchObject({ code: 'unprocessable' });
    const [refused] = await delivered((e) => e.tenantId === tenantId && e.action === 'checkout.create');
    expect(refused).toMatchObject({
      source: 'billing',
      outcome: 'denied',
      actor: REQUEST.actor,
      ip: REQUEST.clientIp,
      requestId: REQUEST.requestId,
      target: { type: 'tenant', id: tenantId },
      details: { plan_id: 'enterprise', provider: 'builtin', reason: 'builtin_paid_checkout_off' },
    });
  });

  it('counts refusals in the per-tenant throttle, so a client cannot grow the trail at will', async () => {
    const tenantId = newId('tenant');
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) {
      codes.push(
        await off.client.createCheckoutSession({ tenantId, planId: 'pro', publicBaseUrl: BASE }).then(
          () => 'ok',
          (err: { code: string }) => err.code,
        ),
      );
    }
    expect(codes).toEqual([
      'unprocessable',
      'unprocessable',
      'unprocessable',
      'rate_limited',
      'rate_limited',
    ]);
    await delivered((e) => e.tenantId === tenantId && e.action === 'checkout.create', 3);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await admin.events()).filter((e) => e.tenantId === tenantId)).toHaveLength(3);
  });

  it('still checks out the free plan (a downgrade) and completes it', async () => {
    const tenantId = newId('tenant');
    await off.client.setPlan({ tenantId, planId: 'pro' });
    const { session } = await off.client.createCheckoutSession({
      tenantId,
      planId: 'free',
      publicBaseUrl: BASE,
    });
    expect(session).toMatchObject({ planId: 'free', provider: 'builtin', status: 'open' });
    const done = await off.client.completeCheckoutSession({ id: session?.id ?? '' });
    expect(done.subscription?.planId).toBe('free');
    expect(await planOf(tenantId)).toBe('free');
  });

  it('lets a platform admin set any plan (SetPlan) while paid checkout is off', async () => {
    const tenantId = newId('tenant');
    const set = await off.client.setPlan({ tenantId, planId: 'enterprise' });
    expect(set.subscription?.planId).toBe('enterprise');
    expect(await planOf(tenantId)).toBe('enterprise');
    expect((await off.client.getEntitlements({ tenantId })).planId).toBe('enterprise');
  });

  it('does not complete a paid session created while paid checkout was on: refused, recorded, still open', async () => {
    const tenantId = newId('tenant');
    // Created by the replica with paid checkout on (or before an operator turned it off).
    const { session } = await on.client.createCheckoutSession({
      tenantId,
      planId: 'pro',
      publicBaseUrl: BASE,
    });
    const id = session?.id ?? '';
    await expect(
      runWithRequestContext(REQUEST, () => off.client.completeCheckoutSession({ id })),
    ).rejects.toMatchObject({
      code: 'unprocessable',
      message: expect.stringContaining('BILLING_BUILTIN_PAID_CHECKOUT'),
    });
    expect(await planOf(tenantId)).toBe('free');
    expect((await off.client.getCheckoutSession({ id })).session?.status).toBe('open');
    const [refused] = await delivered((e) => e.tenantId === tenantId && e.action === 'checkout.confirm');
    expect(refused).toMatchObject({
      outcome: 'denied',
      actor: REQUEST.actor,
      target: { type: 'checkout_session', id },
      details: { plan_id: 'pro', provider: 'builtin', reason: 'builtin_paid_checkout_off' },
    });
    expect(
      (await admin.events()).filter((e) => e.tenantId === tenantId && e.action === 'plan.change'),
    ).toEqual([]);

    // With paid checkout on, the same session completes: it was refused for the setting alone.
    const done = await on.client.completeCheckoutSession({ id });
    expect(done.subscription?.planId).toBe('pro');
    expect(await planOf(tenantId)).toBe('pro');
  });
});
