import type { BillingService } from '@relayplane/billing';
import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { ConfigError } from '@relayplane/shared/config';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { hasMetric, sampleValue, scrape } from '@relayplane/testing/metrics';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAdminConfig } from '../src/config.ts';
import type { AdminService } from '../src/service.ts';
import { createAdmin, startBilling } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const SERVICE = 'relayplane.admin.v1.AdminService';
const LOGINS = 'relayplane_logins_total';
const HANDLED = 'relayplane_grpc_server_handled_total';

describe('readAdminConfig: ADMIN_METRICS_ADDRESS', () => {
  const base = {
    DATABASE_URL: 'postgres://db.internal/relayplane',
    RELAYPLANE_KEK: Buffer.alloc(32, 1).toString('base64'),
  };

  it('is unset by default and read as host:port when set', () => {
    expect(readAdminConfig(base).metricsAddress).toBeUndefined();
    expect(readAdminConfig({ ...base, ADMIN_METRICS_ADDRESS: '0.0.0.0:9464' }).metricsAddress).toBe(
      '0.0.0.0:9464',
    );
  });

  it.each(['9464', 'admin', 'tcp://0.0.0.0:9464'])('refuses %s, naming the variable', (value) => {
    const read = () => readAdminConfig({ ...base, ADMIN_METRICS_ADDRESS: value });
    expect(read).toThrow(ConfigError);
    expect(read).toThrow(/ADMIN_METRICS_ADDRESS must be host:port/);
  });
});

describe('admin metrics over real gRPC and HTTP', () => {
  let database: TestDatabase;
  let billing: BillingService;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  let url: string;

  beforeAll(async () => {
    database = await createTestDatabase('admin_metrics');
    billing = await startBilling(database.url);
    admin = await createAdmin(database.url, `127.0.0.1:${billing.port}`, {
      ADMIN_METRICS_ADDRESS: '127.0.0.1:0',
      ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP: '3',
    });
    await admin.start();
    client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
    expect(admin.metricsPort).toBeGreaterThan(0);
    url = `http://127.0.0.1:${admin.metricsPort}/metrics`;
  });

  afterAll(async () => {
    client?.close();
    await admin?.destroy();
    await billing?.destroy();
    await database?.drop();
  });

  it('counts logins by result (success, failure, throttled) and the Login calls by gRPC status', async () => {
    const email = 'metrics-login@example.com';
    await client.signup({ email, password: PASSWORD, tenantName: 'Metrics inc' });
    const before = await scrape(url);
    const login = (password: string) => client.login({ email, password, clientIp: '198.51.100.7' });
    await login(PASSWORD);
    await expect(login('wrong password here')).rejects.toMatchObject({ code: 'unauthenticated' });
    await expect(login('')).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(login('wrong password again')).rejects.toMatchObject({ code: 'unauthenticated' });
    // The limit is 3 attempts per account and IP and window: the success cleared its count, and the
    // empty password was refused before counting.
    await expect(login('wrong password three')).rejects.toMatchObject({ code: 'unauthenticated' });
    await expect(login(PASSWORD)).rejects.toMatchObject({ code: 'rate_limited' });
    const after = await scrape(url);
    expect(hasMetric(after, LOGINS, 'counter')).toBe(true);
    const moved = (name: string, labels: Record<string, string>) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(moved(LOGINS, { result: 'success' })).toBe(1);
    expect(moved(LOGINS, { result: 'failure' })).toBe(4);
    expect(moved(LOGINS, { result: 'throttled' })).toBe(1);
    expect(moved(HANDLED, { service: SERVICE, method: 'Login', code: 'OK' })).toBe(1);
    expect(moved(HANDLED, { service: SERVICE, method: 'Login', code: 'UNAUTHENTICATED' })).toBe(3);
    expect(moved(HANDLED, { service: SERVICE, method: 'Login', code: 'INVALID_ARGUMENT' })).toBe(1);
    expect(moved(HANDLED, { service: SERVICE, method: 'Login', code: 'RESOURCE_EXHAUSTED' })).toBe(1);
    expect(after).not.toContain(email);
    expect(after).not.toContain('198.51.100.7');
  });

  it('exposes readiness, its changes since start and the reachability of PostgreSQL', async () => {
    const text = await scrape(url);
    expect(sampleValue(text, 'relayplane_ready', { service: 'relayplane.admin.v1.AdminService' })).toBe(1);
    // Start-up: not serving → serving, once.
    expect(
      sampleValue(text, 'relayplane_readiness_changes_total', {
        service: 'relayplane.admin.v1.AdminService',
      }),
    ).toBe(1);
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'postgresql' })).toBe(1);
  });

  it('answers 404 beside /metrics', async () => {
    const res = await fetch(`http://127.0.0.1:${admin.metricsPort}/`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: 'not found' });
  });
});
