import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { ManualClock } from '@relayplane/shared/clock';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBillingConfig } from '../src/config.ts';
import { BillingService } from '../src/service.ts';

describe('billing service over gRPC (real PostgreSQL)', () => {
  let database: TestDatabase;
  let service: BillingService;
  let client: ServiceClient<typeof BillingRpc>;
  const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));

  beforeAll(async () => {
    database = await createTestDatabase('billing');
    const config = readBillingConfig({
      BILLING_DATABASE_URL: database.url,
      BILLING_LISTEN_ADDRESS: '127.0.0.1:0',
    });
    service = await BillingService.create(config, { logger: testLogger('billing'), clock });
    await service.start();
    client = connect(BillingRpc, `127.0.0.1:${service.port}`);
  });

  afterAll(async () => {
    client?.close();
    await service?.destroy();
    await database?.drop();
  });

  it('lists the three plans with every limit and a price', async () => {
    const { plans } = await client.listPlans({});
    expect(plans.map((p) => p.id)).toEqual(['free', 'pro', 'enterprise']);
    const free = plans[0];
    expect(free?.limits).toMatchObject({
      maxConcurrentConnections: 10,
      maxApiKeys: 2,
      maxCredentialTtlSeconds: 900,
    });
    expect(free?.price).toMatchObject({ currency: 'usd', monthlyAmountMinor: 0 });
  });

  it('puts a tenant without a subscription on the free plan', async () => {
    const res = await client.getSubscription({ tenantId: newId('tenant') });
    expect(res.subscription?.planId).toBe('free');
    expect(res.plan?.id).toBe('free');
  });

  it('changes a plan idempotently and reads it back', async () => {
    const tenantId = newId('tenant');
    await client.setPlan({ tenantId, planId: 'pro' });
    const again = await client.setPlan({ tenantId, planId: 'pro' });
    expect(again.subscription?.planId).toBe('pro');
    expect(again.subscription?.updatedAt?.seconds).toBe(BigInt(clock.now().getTime() / 1000));
    const read = await client.getSubscription({ tenantId });
    expect(read.plan?.limits?.maxConcurrentConnections).toBe(1000);
  });

  it('rejects an unknown plan and a malformed tenant id with invalid_request', async () => {
    const unknownPlan = client.setPlan({ tenantId: newId('tenant'), planId: 'platinum' });
    await expect(unknownPlan).rejects.toBeInstanceOf(AppError);
    await expect(unknownPlan).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('platinum'),
    });
    await expect(client.getSubscription({ tenantId: 'nope' })).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });

  it('answers the plans of many tenants at once, in the order asked, the default plan without a subscription', async () => {
    const [pro, free, enterprise] = [newId('tenant'), newId('tenant'), newId('tenant')];
    await client.setPlan({ tenantId: pro, planId: 'pro' });
    await client.setPlan({ tenantId: enterprise, planId: 'enterprise' });
    const { subscriptions } = await client.getSubscriptions({ tenantIds: [enterprise, free, pro] });
    expect(subscriptions.map((s) => [s.tenantId, s.planId, s.updatedAt !== undefined])).toEqual([
      [enterprise, 'enterprise', true],
      [free, 'free', false],
      [pro, 'pro', true],
    ]);
    expect((await client.getSubscriptions({ tenantIds: [] })).subscriptions).toEqual([]);
  });

  it('refuses a batch over one page (200 tenants) or with an id that is not a tenant id', async () => {
    const page = Array.from({ length: 200 }, () => newId('tenant'));
    expect((await client.getSubscriptions({ tenantIds: page })).subscriptions).toHaveLength(200);
    await expect(client.getSubscriptions({ tenantIds: [...page, newId('tenant')] })).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'at most 200 tenant_ids at once',
    });
    await expect(client.getSubscriptions({ tenantIds: [newId('tenant'), 'nope'] })).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'tenant_ids must be tenant ids',
    });
  });

  it('reports SERVING on the standard health service while its database answers', async () => {
    const health = connect(HealthService, `127.0.0.1:${service.port}`);
    try {
      const res = await health.check({ service: BillingRpc.typeName });
      expect(res.status).toBe(ServingStatus.SERVING);
      await expect(health.check({ service: 'nope' })).rejects.toMatchObject({ code: 'not_found' });
    } finally {
      health.close();
    }
  });
});
