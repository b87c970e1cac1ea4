import { newId } from '@relayplane/contract/ids';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { ConfigError } from '@relayplane/shared/config';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import { hasMetric, sampleValue, scrape } from '@relayplane/testing/metrics';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBillingConfig } from '../src/config.ts';
import { BillingService } from '../src/service.ts';

const SERVICE = 'relayplane.billing.v1.BillingService';
const HANDLED = 'relayplane_grpc_server_handled_total';

describe('readBillingConfig: BILLING_METRICS_ADDRESS', () => {
  const base = { DATABASE_URL: 'postgres://db.internal/relayplane' };

  it('is unset by default and read as host:port when set', () => {
    expect(readBillingConfig(base).metricsAddress).toBeUndefined();
    expect(
      readBillingConfig({ ...base, BILLING_METRICS_ADDRESS: 'billing-0.internal:9464' }).metricsAddress,
    ).toBe('billing-0.internal:9464');
  });

  it.each(['9464', 'billing', ':9464 x'])('refuses %s, naming the variable', (value) => {
    const read = () => readBillingConfig({ ...base, BILLING_METRICS_ADDRESS: value });
    expect(read).toThrow(ConfigError);
    expect(read).toThrow(/BILLING_METRICS_ADDRESS must be host:port/);
  });
});

describe('billing metrics over real gRPC and HTTP', () => {
  let database: TestDatabase;
  let service: BillingService;
  let client: ServiceClient<typeof BillingRpc>;
  let url: string;
  let stopped = false;

  beforeAll(async () => {
    database = await createTestDatabase('billing_metrics');
    service = await BillingService.create(
      readBillingConfig({
        BILLING_DATABASE_URL: database.url,
        BILLING_LISTEN_ADDRESS: '127.0.0.1:0',
        BILLING_METRICS_ADDRESS: '127.0.0.1:0',
      }),
      { logger: testLogger('billing') },
    );
    await service.start();
    client = connect(BillingRpc, `127.0.0.1:${service.port}`);
    expect(service.metricsPort).toBeGreaterThan(0);
    url = `http://127.0.0.1:${service.metricsPort}/metrics`;
  });

  afterAll(async () => {
    client?.close();
    if (!stopped) await service?.destroy();
    await database?.drop();
  });

  it('counts calls by method and gRPC status, with durations, and no tenant id in any label', async () => {
    const before = await scrape(url);
    const tenantId = newId('tenant');
    await client.listPlans({});
    await client.setPlan({ tenantId, planId: 'pro' });
    await client.getSubscription({ tenantId });
    await expect(client.setPlan({ tenantId, planId: 'no-such-plan' })).rejects.toMatchObject({
      code: 'invalid_request',
    });
    const after = await scrape(url);
    expect(hasMetric(after, HANDLED, 'counter')).toBe(true);
    expect(hasMetric(after, 'process_cpu_user_seconds_total', 'counter')).toBe(true);
    const moved = (name: string, labels: Record<string, string>) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(moved(HANDLED, { service: SERVICE, method: 'ListPlans', code: 'OK' })).toBe(1);
    expect(moved(HANDLED, { service: SERVICE, method: 'SetPlan', code: 'OK' })).toBe(1);
    expect(moved(HANDLED, { service: SERVICE, method: 'SetPlan', code: 'INVALID_ARGUMENT' })).toBe(1);
    expect(moved(HANDLED, { service: SERVICE, method: 'GetSubscription', code: 'OK' })).toBe(1);
    expect(
      moved('relayplane_grpc_server_handling_seconds_count', { service: SERVICE, method: 'SetPlan' }),
    ).toBe(2);
    expect(after).not.toContain(tenantId);
  });

  it('exposes readiness, its changes since start and the reachability of PostgreSQL', async () => {
    const text = await scrape(url);
    expect(sampleValue(text, 'relayplane_ready', { service: 'relayplane.billing.v1.BillingService' })).toBe(
      1,
    );
    // Start-up: not serving → serving, once.
    expect(
      sampleValue(text, 'relayplane_readiness_changes_total', {
        service: 'relayplane.billing.v1.BillingService',
      }),
    ).toBe(1);
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'postgresql' })).toBe(1);
  });

  it('destroy() closes the metrics listener', async () => {
    client.close();
    await service.destroy();
    stopped = true;
    await expect(fetch(url)).rejects.toThrow();
  });
});
