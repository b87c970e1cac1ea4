/**
 * The gateway's workflows (src/workflows/): the use cases that take more than one service call,
 * each step's order and what a failure between steps answers. Driven with recording clients
 * (the order of calls is what is tested); the routes on top are tested through inject() against
 * the real services (routes-api-keys, routes-containment, routes-billing, routes-device tests).
 */
import { create } from '@bufbuild/protobuf';
import { AppError } from '@relayplane/contract/errors';
import { ApiKeySchema, PrincipalSchema } from '@relayplane/proto/admin';
import { describe, expect, it } from 'vitest';
import type { AdminClient, BillingClient, IssuerClient } from '../src/clients.ts';
import { revokeApiKeyAndCredentials } from '../src/workflows/api-keys.ts';
import { listProjectCredentials, revokeProjectCredentials } from '../src/workflows/credentials.ts';
import { loginWithOptionalCode } from '../src/workflows/login.ts';
import { tenantConnections } from '../src/workflows/tenant-connections.ts';
import { listTenantsWithPlans, setTenantPlan } from '../src/workflows/tenant-plan.ts';

const principal = create(PrincipalSchema, { tenantId: 'ten_1' });
const scope = { principal, tenantId: 'ten_1', projectId: 'prj_1' };

/** Clients whose methods record their name and answer from `answers` (a function may throw). */
function recording(
  answers: Record<string, (req: Record<string, unknown>) => unknown>,
  /** Also records `<label>.<method>` here: the order of calls across clients. */
  order?: { calls: string[]; label: string },
) {
  const calls: string[] = [];
  const requests: Record<string, unknown>[] = [];
  const client = new Proxy(
    {},
    {
      get: (_t, name: string) => async (req: Record<string, unknown>) => {
        calls.push(name);
        order?.calls.push(`${order.label}.${name}`);
        requests.push(req);
        const answer = answers[name];
        if (!answer) throw new Error(`unexpected call ${name}`);
        return answer(req);
      },
    },
  );
  return { client, calls, requests };
}

const unavailable = () => {
  throw new AppError('unavailable', 'admin is unavailable', { retryAfterSeconds: 2 });
};

describe('revokeApiKeyAndCredentials', () => {
  const key = create(ApiKeySchema, { id: 'key_1', projectId: 'prj_1' });

  it('checks the key, revokes its credentials (key recorded as revoked), then the key, in that order', async () => {
    const order: string[] = [];
    const admin = recording(
      { listApiKeys: () => ({ apiKeys: [key] }), revokeApiKey: () => ({ apiKey: key }) },
      { calls: order, label: 'admin' },
    );
    const issuer = recording(
      { revokeCredentials: () => ({ revoked: 3 }) },
      { calls: order, label: 'issuer' },
    );
    const clients = { admin: admin.client as AdminClient, issuer: issuer.client as IssuerClient };
    const res = await revokeApiKeyAndCredentials(clients, { ...scope, keyId: 'key_1' });
    expect(order).toEqual(['admin.listApiKeys', 'issuer.revokeCredentials', 'admin.revokeApiKey']);
    expect(issuer.requests[0]).toMatchObject({
      tenantId: 'ten_1',
      projectId: 'prj_1',
      apiKeyId: 'key_1',
      apiKeyRevoked: true,
    });
    expect(res.apiKey.id).toBe('key_1');
    expect(res.revokedCredentials).toBe(3);
  });

  it('answers 404 for a key the project does not have, before the issuer records anything', async () => {
    const admin = recording({ listApiKeys: () => ({ apiKeys: [] }) });
    const issuer = recording({});
    const err = await revokeApiKeyAndCredentials(
      { admin: admin.client as AdminClient, issuer: issuer.client as IssuerClient },
      { ...scope, keyId: 'key_2' },
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'not_found', message: 'API key not found' });
    expect(issuer.calls).toEqual([]);
  });

  it('says what was done when admin fails after the credentials were revoked (retryable 503)', async () => {
    const admin = recording({ listApiKeys: () => ({ apiKeys: [key] }), revokeApiKey: unavailable });
    const issuer = recording({ revokeCredentials: () => ({ revoked: 2 }) });
    const err = await revokeApiKeyAndCredentials(
      { admin: admin.client as AdminClient, issuer: issuer.client as IssuerClient },
      { ...scope, keyId: 'key_1' },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({
      code: 'unavailable',
      retryAfterSeconds: 2,
      message:
        "the key's credentials were revoked (2 by this call) and it can obtain no new ones, but the key itself could not be revoked yet; retry the call",
    });
  });
});

describe('revokeProjectCredentials and listProjectCredentials', () => {
  it("answers 404 for another tenant's project before looking at the rest of the request", async () => {
    const admin = recording({
      listApiKeys: () => {
        throw new AppError('not_found', 'project not found');
      },
    });
    const issuer = recording({});
    const clients = { admin: admin.client as AdminClient, issuer: issuer.client as IssuerClient };
    const err = await revokeProjectCredentials(clients, {
      ...scope,
      apiKeyId: undefined,
      issuedBefore: 'not a date',
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'not_found' });
    const listed = await listProjectCredentials(clients, {
      ...scope,
      apiKeyId: '',
      active: false,
      limit: 0,
      cursor: '',
    }).catch((e: unknown) => e);
    expect(listed).toMatchObject({ code: 'not_found' });
    expect(issuer.calls).toEqual([]);
  });

  it('refuses a bad issued_before (400) and a key the project does not have (404); else revokes', async () => {
    const admin = recording({ listApiKeys: () => ({ apiKeys: [{ id: 'key_1' }] }) });
    const issuer = recording({ revokeCredentials: () => ({ revoked: 4 }) });
    const clients = { admin: admin.client as AdminClient, issuer: issuer.client as IssuerClient };
    await expect(
      revokeProjectCredentials(clients, {
        ...scope,
        apiKeyId: undefined,
        issuedBefore: '2026-02-31T00:00:00Z',
      }),
    ).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'issued_before must be an RFC 3339 date-time',
    });
    await expect(
      revokeProjectCredentials(clients, { ...scope, apiKeyId: 'key_9', issuedBefore: undefined }),
    ).rejects.toMatchObject({ code: 'not_found', message: 'API key not found' });
    expect(issuer.calls).toEqual([]);
    const revoked = await revokeProjectCredentials(clients, {
      ...scope,
      apiKeyId: 'key_1',
      issuedBefore: '2026-01-01T00:00:00.2Z',
    });
    expect(revoked).toBe(4);
    expect(issuer.requests[0]).toMatchObject({
      apiKeyId: 'key_1',
      issuedBefore: { seconds: 1767225600n, nanos: 200_000_000 },
    });
  });
});

describe('setTenantPlan', () => {
  it('asks admin for the tenant first (404, platform admins) and billing only then', async () => {
    const admin = recording({
      getTenant: (req) => {
        if (req.tenantId !== 'ten_1') throw new AppError('not_found', 'tenant not found');
        return {};
      },
    });
    const billing = recording({ setPlan: () => ({ subscription: { planId: 'pro' } }) });
    const clients = { admin: admin.client as AdminClient, billing: billing.client as BillingClient };
    await expect(
      setTenantPlan(clients, { principal, tenantId: 'ten_2', planId: 'pro' }),
    ).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(billing.calls).toEqual([]);
    const res = await setTenantPlan(clients, { principal, tenantId: 'ten_1', planId: 'pro' });
    expect(res.subscription?.planId).toBe('pro');
    expect(billing.requests[0]).toEqual({ tenantId: 'ten_1', planId: 'pro' });
  });
});

describe('listTenantsWithPlans', () => {
  const page = { principal, limit: 2, cursor: '' };
  const overview = (id: string, memberCount: number) => ({ tenant: { id, name: id }, memberCount });

  it("asks admin for the page (platform admins), then billing for that page's plans in one call", async () => {
    const order: string[] = [];
    const admin = recording(
      { listTenants: () => ({ tenants: [overview('ten_1', 1), overview('ten_2', 3)], nextCursor: 'c2' }) },
      { calls: order, label: 'admin' },
    );
    const billing = recording(
      {
        getSubscriptions: () => ({
          subscriptions: [
            { tenantId: 'ten_2', planId: 'pro' },
            { tenantId: 'ten_1', planId: 'free' },
          ],
        }),
      },
      { calls: order, label: 'billing' },
    );
    const clients = { admin: admin.client as AdminClient, billing: billing.client as BillingClient };
    const res = await listTenantsWithPlans(clients, page);
    expect(order).toEqual(['admin.listTenants', 'billing.getSubscriptions']);
    expect(admin.requests[0]).toEqual(page);
    expect(billing.requests[0]).toEqual({ tenantIds: ['ten_1', 'ten_2'] });
    expect(res.tenants.map((t) => [t.tenant.id, t.memberCount, t.planId])).toEqual([
      ['ten_1', 1, 'free'],
      ['ten_2', 3, 'pro'],
    ]);
    expect(res.nextCursor).toBe('c2');
  });

  it('asks billing nothing when admin refuses, or for an empty page', async () => {
    const refusing = recording({
      listTenants: () => {
        throw new AppError('forbidden', 'only platform admins may manage tenants');
      },
    });
    const billing = recording({});
    await expect(
      listTenantsWithPlans(
        { admin: refusing.client as AdminClient, billing: billing.client as BillingClient },
        page,
      ),
    ).rejects.toMatchObject({ code: 'forbidden' });
    const empty = recording({ listTenants: () => ({ tenants: [], nextCursor: '' }) });
    const res = await listTenantsWithPlans(
      { admin: empty.client as AdminClient, billing: billing.client as BillingClient },
      page,
    );
    expect(res).toEqual({ tenants: [], nextCursor: '' });
    expect(billing.calls).toEqual([]);
  });

  it('fails the page (500, nothing made up) when billing answers no plan for a tenant of it', async () => {
    const admin = recording({ listTenants: () => ({ tenants: [overview('ten_1', 1)], nextCursor: '' }) });
    const billing = recording({ getSubscriptions: () => ({ subscriptions: [] }) });
    await expect(
      listTenantsWithPlans(
        { admin: admin.client as AdminClient, billing: billing.client as BillingClient },
        page,
      ),
    ).rejects.toMatchObject({ code: 'internal' });
  });
});

describe('tenantConnections', () => {
  const entitlement = (limit: string, value: number) => ({
    limit,
    value,
    exceededCode: 'payment_required',
    exceededMessage: `over ${limit}`,
  });

  it("answers the issuer's counts with the cap billing decides (max_concurrent_connections)", async () => {
    const issuer = recording({ getTenantConnections: () => ({ liveSessions: 2, slotsHeld: 5 }) });
    const billing = recording({
      getEntitlements: () => ({
        planId: 'free',
        entitlements: [entitlement('max_api_keys', 2), entitlement('max_concurrent_connections', 10)],
      }),
    });
    const clients = { issuer: issuer.client as IssuerClient, billing: billing.client as BillingClient };
    expect(await tenantConnections(clients, 'ten_1')).toEqual({ liveSessions: 2, slotsHeld: 5, cap: 10 });
    expect(issuer.requests[0]).toEqual({ tenantId: 'ten_1' });
    expect(billing.requests[0]).toEqual({ tenantId: 'ten_1' });
  });

  it('fails when either service does, and when billing answers no cap', async () => {
    const issuer = recording({ getTenantConnections: unavailable });
    const billing = recording({ getEntitlements: () => ({ planId: 'free', entitlements: [] }) });
    const clients = { issuer: issuer.client as IssuerClient, billing: billing.client as BillingClient };
    await expect(tenantConnections(clients, 'ten_1')).rejects.toMatchObject({ code: 'unavailable' });
    const counting = recording({ getTenantConnections: () => ({ liveSessions: 0, slotsHeld: 0 }) });
    await expect(
      tenantConnections({ ...clients, issuer: counting.client as IssuerClient }, 'ten_1'),
    ).rejects.toMatchObject({ code: 'internal' });
  });
});

describe('loginWithOptionalCode', () => {
  const input = { email: 'a@example.test', password: 'pw', code: '', clientIp: '127.0.0.1', deviceToken: '' };

  it('signs in with the password alone when admin asks no second step', async () => {
    const admin = recording({ login: () => ({ token: 't1', deviceToken: 'd1', mfaRequired: false }) });
    expect(await loginWithOptionalCode(admin.client as AdminClient, input)).toEqual({
      signedIn: true,
      token: 't1',
      session: undefined,
      deviceToken: 'd1',
    });
    expect(admin.calls).toEqual(['login']);
  });

  it('asks for the code when the account has a second factor and none was sent, else sends it', async () => {
    const admin = recording({
      login: () => ({ mfaRequired: true, mfaToken: 'challenge' }),
      loginMfa: (req) => ({ token: `t-${req.code}`, deviceToken: 'd2' }),
    });
    expect(await loginWithOptionalCode(admin.client as AdminClient, input)).toEqual({ signedIn: false });
    const signed = await loginWithOptionalCode(admin.client as AdminClient, { ...input, code: '123456' });
    expect(signed).toMatchObject({ signedIn: true, token: 't-123456', deviceToken: 'd2' });
    expect(admin.calls).toEqual(['login', 'login', 'loginMfa']);
    expect(admin.requests[2]).toMatchObject({ mfaToken: 'challenge', code: '123456' });
  });
});
