/**
 * No free upgrades through the gateway (issue 18): with the default configuration the built-in
 * provider answers 422 `{"error"}` to a checkout of a paid plan and will not confirm one on its
 * page, while the free plan and the platform admin's direct plan change keep working.
 */
import { newId } from '@relayplane/contract/ids';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

describe('gateway billing routes: no free upgrades through the built-in provider', () => {
  let stack: Stack;
  let n = 0;
  beforeAll(async () => {
    stack = await startStack('gw_billing_abuse');
  });
  afterAll(async () => {
    await stack?.close();
  });

  const freeTenant = () => tenant(stack, { email: `abuse${++n}@example.test`, name: `Abuse ${n}` });
  const checkout = (auth: { authorization: string }, plan: string) =>
    stack.app.inject({
      method: 'POST',
      url: '/admin/v1/billing/checkout-sessions',
      headers: auth,
      payload: { plan },
    });
  /** The confirmation page's form, as a browser posts it. */
  const confirm = (url: string) =>
    stack.app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: '',
    });
  const planOf = async (auth: { authorization: string }) =>
    (await stack.app.inject({ method: 'GET', url: '/admin/v1/billing/subscription', headers: auth })).json<{
      plan: { id: string };
    }>().plan.id;

  it('answers 422 {"error"} naming the setting to a checkout of pro or enterprise; the plan stays free', async () => {
    const t = await freeTenant();
    for (const plan of ['pro', 'enterprise']) {
      const res = await checkout(t.auth, plan);
      expect(res.statusCode, res.body).toBe(422);
      const body = res.json<Record<string, string>>();
      expect(Object.keys(body)).toEqual(['error']);
      expect(body.error).toContain(`paid ${plan} plan`);
      expect(body.error).toContain('BILLING_BUILTIN_PAID_CHECKOUT=true');
    }
    expect(await planOf(t.auth)).toBe('free');
  });

  it('documents the 422 on the checkout operation and on the confirmation page', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>>;
    }>();
    expect(doc.paths['/admin/v1/billing/checkout-sessions']?.post?.responses['422']?.description).toContain(
      'BILLING_BUILTIN_PAID_CHECKOUT',
    );
    expect(doc.paths['/billing/checkout/{id}']?.post?.responses['422']).toBeDefined();
  });

  it('lets a platform admin set a paid plan, and the tenant check out the free plan back (a downgrade)', async () => {
    const t = await freeTenant();
    const set = await stack.app.inject({
      method: 'PUT',
      url: `/admin/v1/tenants/${t.tenantId}/plan`,
      headers: await stack.ownerAuth(),
      payload: { plan: 'enterprise' },
    });
    expect(set.statusCode, set.body).toBe(200);
    expect(await planOf(t.auth)).toBe('enterprise');

    const down = await checkout(t.auth, 'free');
    expect(down.statusCode, down.body).toBe(201);
    const confirmed = await confirm(new URL(down.json<{ url: string }>().url).pathname);
    expect(confirmed.statusCode).toBe(200);
    expect(confirmed.body).toContain('<b>free</b>');
    expect(await planOf(t.auth)).toBe('free');
  });

  it('does not confirm a paid session created while paid checkout was on: 422 page, plan unchanged', async () => {
    const t = await freeTenant();
    // A session of pro as a billing with BILLING_BUILTIN_PAID_CHECKOUT=true stored it.
    const id = newId('checkoutSession');
    const now = new Date();
    await stack.billing.database.db
      .insertInto('checkout_sessions')
      .values({
        id,
        tenant_id: t.tenantId,
        plan_id: 'pro',
        provider: 'builtin',
        status: 'open',
        url: `http://localhost/billing/checkout/${id}`,
        provider_reference: null,
        idempotency_key: null,
        created_at: now,
        expires_at: new Date(now.getTime() + 3_600_000),
        completed_at: null,
      })
      .execute();
    const res = await confirm(`/billing/checkout/${id}`);
    expect(res.statusCode).toBe(422);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.body).toContain('BILLING_BUILTIN_PAID_CHECKOUT');
    expect(await planOf(t.auth)).toBe('free');
    const session = await stack.billing.database.db
      .selectFrom('checkout_sessions')
      .select('status')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(session.status).toBe('open');
  });
});
