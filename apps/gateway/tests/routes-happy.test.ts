import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { thumbprint } from './support/rfc7638.ts';
import { OWNER, type Stack, startStack } from './support/stack.ts';

describe('gateway routes: what works', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack('gw_happy');
  });
  afterAll(async () => {
    await stack?.close();
  });

  const createProject = (
    headers: { authorization: string },
    payload: { name: string; environment?: string },
  ) => stack.app.inject({ method: 'POST', url: '/admin/v1/projects', headers, payload });

  it('liveness answers 200 and every response carries a request id (echoing a valid one)', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await stack.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(echoed.headers['x-request-id']).toBe('abc-123');
    const replaced = await stack.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'bad id\u0001' },
    });
    expect(replaced.headers['x-request-id']).not.toBe('bad id\u0001');
  });

  it('readiness answers 200 when every service reports SERVING', async () => {
    // Services listen before their start-up is done and report SERVING once it is (issue 16):
    // readiness may lag the stack's start by a moment, so ask until it answers 200 (at most 5 s).
    const deadline = Date.now() + 5_000;
    let res = await stack.app.inject({ method: 'GET', url: '/readyz' });
    while (res.statusCode !== 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      res = await stack.app.inject({ method: 'GET', url: '/readyz' });
    }
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      status: 'ready',
      services: { admin: 'SERVING', issuer: 'SERVING', billing: 'SERVING' },
    });
  });

  it('publishes plans with every limit and prices, cacheable', async () => {
    const plans = await stack.app.inject({ method: 'GET', url: '/v1/plans' });
    expect(plans.statusCode).toBe(200);
    expect(plans.headers['cache-control']).toBe('public, max-age=60');
    const body = plans.json<{ plans: { id: string; limits: Record<string, number> }[] }>();
    expect(body.plans.map((p) => p.id)).toEqual(['free', 'pro', 'enterprise']);
    expect(Object.keys(body.plans[0]?.limits ?? {}).sort()).toEqual([
      'max_allowlist_entries',
      'max_api_keys',
      'max_bots',
      'max_concurrent_connections',
      'max_credential_ttl_seconds',
      'max_issuance_per_second_per_key',
      'max_projects',
      'max_webhook_endpoints',
    ]);
    expect(body.plans.map((p) => p.limits.max_issuance_per_second_per_key)).toEqual([20, 200, 2_000]);
    const pricing = await stack.app.inject({ method: 'GET', url: '/v1/pricing' });
    expect(pricing.statusCode).toBe(200);
    expect(pricing.json().prices[1]).toEqual({
      plan_id: 'pro',
      plan_name: 'Pro',
      price: { currency: 'usd', monthly_amount_minor: 4900, contact_sales: false },
    });
  });

  it('serves the JWKS per the contract: six fields, RFC 7638 kids, active key first, cache headers, 304', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/v1/credentials/jwks' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const etag = res.headers.etag as string;
    expect(etag).toMatch(/^"[^"]+"$/);
    const { keys } = res.json<{ keys: Record<string, string>[] }>();
    expect(keys.length).toBeGreaterThanOrEqual(1);
    for (const key of keys) {
      expect(Object.keys(key).sort()).toEqual(['alg', 'crv', 'kid', 'kty', 'use', 'x']);
      expect(key).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
      expect(key.kid).toBe(thumbprint(key as { crv: string; kty: string; x: string }));
    }
    const listed = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/signing-keys',
      headers: await stack.ownerAuth(),
    });
    const active = listed
      .json<{ keys: { kid: string; state: string }[] }>()
      .keys.find((k) => k.state === 'active');
    expect(keys[0]?.kid).toBe(active?.kid);

    const notModified = await stack.app.inject({
      method: 'GET',
      url: '/v1/credentials/jwks',
      headers: { 'if-none-match': etag },
    });
    expect(notModified.statusCode).toBe(304);
    expect(notModified.body).toBe('');
    expect(notModified.headers.etag).toBe(etag);
    const other = await stack.app.inject({
      method: 'GET',
      url: '/v1/credentials/jwks',
      headers: { 'if-none-match': '"other"' },
    });
    expect(other.statusCode).toBe(200);
  });

  it('signs up, logs in, reads the session, creates and lists projects, rejects a duplicate name with 409, logs out', async () => {
    const signup = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/signup',
      payload: { email: 'dev@example.test', password: 'a long enough password', tenant_name: 'Dev Co' },
    });
    expect(signup.statusCode).toBe(201);
    const { tenant } = signup.json<{ tenant: { id: string; name: string } }>();
    expect(tenant.name).toBe('Dev Co');

    const login = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/login',
      payload: { email: 'dev@example.test', password: 'a long enough password' },
    });
    expect(login.statusCode).toBe(200);
    const { token, token_type, session } = login.json();
    expect(token).toMatch(/^rpu_[0-9a-f]{72}$/);
    expect(token_type).toBe('Bearer');
    expect(session).toMatchObject({ role: 'owner', tenant: { id: tenant.id }, authenticated_by: 'bearer' });
    const auth = { authorization: `Bearer ${token}` };

    const me = await stack.app.inject({ method: 'GET', url: '/admin/v1/auth/session', headers: auth });
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({
      user: { email: 'dev@example.test', platform_admin: false },
      tenant: { id: tenant.id },
    });

    const created = await createProject(auth, { name: 'web-app' });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      name: 'web-app',
      tenant_id: tenant.id,
      environment: 'production',
    });
    expect(created.json().id).toMatch(/^prj_/);

    const staging = await createProject(auth, { name: 'web-app-staging', environment: 'staging' });
    expect(staging.json().environment).toBe('staging');

    const dup = await createProject(auth, { name: 'web-app' });
    expect(dup.statusCode).toBe(409);
    expect(Object.keys(dup.json())).toEqual(['error']);

    const list = await stack.app.inject({ method: 'GET', url: '/admin/v1/projects', headers: auth });
    expect(list.statusCode).toBe(200);
    expect(list.json().projects.map((p: { name: string }) => p.name)).toEqual(['web-app', 'web-app-staging']);

    // Another tenant sees none of them, and may use the same name.
    const ownerList = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/projects',
      headers: await stack.ownerAuth(),
    });
    expect(ownerList.json().projects.map((p: { name: string }) => p.name)).not.toContain('web-app-staging');
    const sameName = await createProject(await stack.ownerAuth(), { name: 'web-app' });
    expect(sameName.statusCode).toBe(201);

    const logout = await stack.app.inject({ method: 'POST', url: '/admin/v1/auth/logout', headers: auth });
    expect(logout.statusCode).toBe(204);
    const after = await stack.app.inject({ method: 'GET', url: '/admin/v1/auth/session', headers: auth });
    expect(after.statusCode).toBe(401);
    expect(after.json()).toEqual({ error: 'invalid or expired token' });
  });

  it('the bootstrap owner is a platform admin on the bootstrap plan', async () => {
    const me = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: await stack.ownerAuth(),
    });
    expect(me.json()).toMatchObject({
      user: { email: OWNER.email, platform_admin: true },
      role: 'owner',
      tenant: { name: 'acme' },
    });
    const sub = await stack.clients.billing.getSubscription({ tenantId: me.json().tenant.id });
    expect(sub.subscription?.planId).toBe('enterprise');
  });

  it('lets a platform admin list signing keys and request a rotation (pending until the next key is eligible)', async () => {
    const auth = await stack.ownerAuth();
    const listed = await stack.app.inject({ method: 'GET', url: '/admin/v1/signing-keys', headers: auth });
    expect(listed.statusCode).toBe(200);
    const states = listed.json<{ keys: { state: string }[] }>().keys.map((k) => k.state);
    expect(states).toContain('active');
    expect(states).toContain('next');
    const rotate = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/signing-keys/rotate',
      headers: auth,
    });
    expect(rotate.statusCode).toBe(202);
    expect(rotate.json().rotation_pending_since).toEqual(expect.any(String));
    const next = rotate.json().keys.find((k: { state: string }) => k.state === 'next');
    expect(Date.parse(next.eligible_at)).toBeGreaterThan(Date.now());
  });

  it('answers every HTML page with the same security headers: the checkout page and the device page alike', async () => {
    const pages = {
      checkout: await stack.app.inject({ method: 'GET', url: '/billing/checkout/cks_00000000000000000000' }),
      device: await stack.app.inject({ method: 'GET', url: '/device' }),
    };
    const security = (res: { headers: Record<string, unknown> }) =>
      Object.fromEntries(
        [
          'content-type',
          'cache-control',
          'content-security-policy',
          'x-frame-options',
          'referrer-policy',
          'x-content-type-options',
        ].map((name) => [name, res.headers[name]]),
      );
    expect(pages.checkout.statusCode).toBe(404);
    expect(pages.device.statusCode).toBe(200);
    for (const res of Object.values(pages)) {
      expect(security(res)).toEqual({
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        'content-security-policy':
          "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
        'x-content-type-options': 'nosniff',
      });
    }
  });
});
