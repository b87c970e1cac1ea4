import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '@relayplane/shared/config';
import { type MetricsServer, type Registry, serveMetrics } from '@relayplane/shared/metrics';
import { testLogger } from '@relayplane/testing/logger';
import { hasMetric, samples, sampleValue, scrape } from '@relayplane/testing/metrics';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGatewayConfig } from '../src/config.ts';
import { GatewayService } from '../src/service.ts';
import { type Stack, startStack } from './support/stack.ts';
import { PASSWORD, tenant } from './support/tenant.ts';

const ISSUED = 'relayplane_credentials_issued_total';
const REQUESTS = 'relayplane_http_requests_total';
const DURATION_COUNT = 'relayplane_http_request_duration_seconds_count';
const CREDENTIALS = { method: 'POST', route: '/api/v1/credentials' };

describe('gateway metrics through the real HTTP surface and the issuer behind it', () => {
  let stack: Stack;
  let gatewayMetrics: MetricsServer;
  let gatewayUrl: string;
  let issuerUrl: string;
  let session: { authorization: string };
  let projectId: string;
  let apiKey: string;
  let tenantId: string;

  beforeAll(async () => {
    stack = await startStack('gw_metrics', { serveMetrics: true });
    gatewayMetrics = await serveMetrics('127.0.0.1:0', stack.metrics, testLogger('gateway'));
    gatewayUrl = `http://127.0.0.1:${gatewayMetrics.port}/metrics`;
    expect(stack.issuer.metricsPort).toBeGreaterThan(0);
    issuerUrl = `http://127.0.0.1:${stack.issuer.metricsPort}/metrics`;
    const owner = await tenant(stack, { email: 'metrics@example.test', name: 'Metrics Co' });
    session = owner.auth;
    tenantId = owner.tenantId;
    projectId = await owner.project('metered');
    apiKey = (await owner.apiKey(projectId, { name: 'backend' })).key;
  });

  afterAll(async () => {
    await gatewayMetrics?.close();
    await stack?.close();
  });

  const issue = (key = apiKey) =>
    stack.app.inject({
      method: 'POST',
      url: '/api/v1/credentials',
      headers: { 'x-api-key': key },
      payload: { ttl_seconds: 300 },
    });

  it('issuing N credentials moves the gateway request counter and the issuer counter by exactly N', async () => {
    const gwBefore = await scrape(gatewayUrl);
    const issuerBefore = await scrape(issuerUrl);
    const N = 3;
    for (let i = 0; i < N; i++) expect((await issue()).statusCode).toBe(201);
    const gwAfter = await scrape(gatewayUrl);
    const issuerAfter = await scrape(issuerUrl);
    const moved = (before: string, after: string, name: string, labels: Record<string, string> = {}) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);

    expect(hasMetric(gwAfter, REQUESTS, 'counter')).toBe(true);
    expect(hasMetric(gwAfter, 'relayplane_http_request_duration_seconds', 'histogram')).toBe(true);
    expect(moved(gwBefore, gwAfter, REQUESTS, { ...CREDENTIALS, status: '201' })).toBe(N);
    expect(moved(gwBefore, gwAfter, DURATION_COUNT, CREDENTIALS)).toBe(N);
    expect(hasMetric(issuerAfter, ISSUED, 'counter')).toBe(true);
    expect(moved(issuerBefore, issuerAfter, ISSUED)).toBe(N);
    // The gateway issues over long-lived IssueCredentials streams: at least one is open now.
    expect(sampleValue(issuerAfter, 'relayplane_issuance_streams')).toBeGreaterThanOrEqual(1);
    // IssueCredentials is a stream: the gRPC server counts it once it ends, not per request.
    expect(
      samples(issuerAfter).filter(
        (s) => s.name === 'relayplane_grpc_server_handled_total' && s.labels.method === 'IssueCredentials',
      ),
    ).toEqual([]);
  });

  it('a refused request is counted with its status, and the issuer counts no credential for it', async () => {
    const gwBefore = await scrape(gatewayUrl);
    const issuerBefore = await scrape(issuerUrl);
    expect((await issue('svc_live_'.padEnd(73, '0'))).statusCode).toBe(401);
    const gwAfter = await scrape(gatewayUrl);
    const issuerAfter = await scrape(issuerUrl);
    expect(
      sampleValue(gwAfter, REQUESTS, { ...CREDENTIALS, status: '401' }) -
        sampleValue(gwBefore, REQUESTS, { ...CREDENTIALS, status: '401' }),
    ).toBe(1);
    expect(sampleValue(gwAfter, REQUESTS, { ...CREDENTIALS, status: '201' })).toBe(
      sampleValue(gwBefore, REQUESTS, { ...CREDENTIALS, status: '201' }),
    );
    expect(sampleValue(issuerAfter, ISSUED)).toBe(sampleValue(issuerBefore, ISSUED));
  });

  it('a credential refused by the issuer (connection limit) counts as an issuance failure with its code', async () => {
    const failures = (text: string) =>
      sampleValue(text, 'relayplane_credential_issuance_failures_total', { code: 'payment_required' });
    const before = await scrape(issuerUrl);
    // The free plan allows 10 concurrent connections; every credential holds one until it expires.
    let refused = 0;
    let issued = 0;
    for (let i = 0; i < 12 && refused === 0; i++) {
      const res = await issue();
      if (res.statusCode === 402) refused++;
      else if (res.statusCode === 201) issued++;
      else throw new Error(`unexpected ${res.statusCode}: ${res.body}`);
    }
    expect(refused).toBe(1);
    const after = await scrape(issuerUrl);
    expect(failures(after) - failures(before)).toBe(1);
    expect(sampleValue(after, ISSUED) - sampleValue(before, ISSUED)).toBe(issued);
  });

  it('logins move the admin login counter by result and its gRPC server counter by status code', async () => {
    expect(stack.admin.metricsPort).toBeGreaterThan(0);
    const adminUrl = `http://127.0.0.1:${stack.admin.metricsPort}/metrics`;
    const service = 'relayplane.admin.v1.AdminService';
    const before = await scrape(adminUrl);
    const login = (password: string) =>
      stack.app.inject({
        method: 'POST',
        url: '/admin/v1/auth/login',
        payload: { email: 'metrics@example.test', password },
      });
    expect((await login(PASSWORD)).statusCode).toBe(200);
    expect((await login('not the password at all')).statusCode).toBe(401);
    expect((await login('not the password either')).statusCode).toBe(401);
    const after = await scrape(adminUrl);
    const moved = (name: string, labels: Record<string, string>) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(moved('relayplane_logins_total', { result: 'success' })).toBe(1);
    expect(moved('relayplane_logins_total', { result: 'failure' })).toBe(2);
    expect(moved('relayplane_logins_total', { result: 'throttled' })).toBe(0);
    const handled = 'relayplane_grpc_server_handled_total';
    expect(moved(handled, { service, method: 'Login', code: 'OK' })).toBe(1);
    expect(moved(handled, { service, method: 'Login', code: 'UNAUTHENTICATED' })).toBe(2);
    expect(moved('relayplane_grpc_server_handling_seconds_count', { service, method: 'Login' })).toBe(3);
    expect(after).not.toContain('metrics@example.test');
  });

  it('HEAD twins of GET routes and malformed URLs are counted, each once', async () => {
    const before = await scrape(gatewayUrl);
    const head = await stack.app.inject({ method: 'HEAD', url: '/v1/credentials/jwks' });
    expect(head.statusCode).toBe(200);
    const malformed = await stack.app.inject({ method: 'GET', url: '/v1/credentials/%E0%A4%A' });
    expect(malformed.statusCode).toBe(400);
    const text = await scrape(gatewayUrl);
    const moved = (name: string, labels: Record<string, string>) =>
      sampleValue(text, name, labels) - sampleValue(before, name, labels);
    expect(moved(REQUESTS, { method: 'HEAD', route: '/v1/credentials/jwks', status: '200' })).toBe(1);
    expect(moved(REQUESTS, { method: 'GET', route: '/v1/credentials/jwks', status: '200' })).toBe(0);
    expect(moved(REQUESTS, { method: 'GET', route: 'unmatched', status: '400' })).toBe(1);
    const seconds = 'relayplane_http_request_duration_seconds_count';
    expect(moved(seconds, { method: 'HEAD', route: '/v1/credentials/jwks' })).toBe(1);
  });

  it('labels carry route patterns and "unmatched", never raw URLs, ids or secrets', async () => {
    const before = await scrape(gatewayUrl);
    const keys = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: session,
    });
    expect(keys.statusCode).toBe(200);
    const missing = await stack.app.inject({ method: 'GET', url: '/no/such/path?token=sekrit-value' });
    expect(missing.statusCode).toBe(404);
    const text = await scrape(gatewayUrl);
    const route = { method: 'GET', route: '/admin/v1/projects/:project_id/api-keys', status: '200' };
    expect(sampleValue(text, REQUESTS, route) - sampleValue(before, REQUESTS, route)).toBe(1);
    const unmatched = { method: 'GET', route: 'unmatched', status: '404' };
    expect(sampleValue(text, REQUESTS, unmatched) - sampleValue(before, REQUESTS, unmatched)).toBe(1);
    // Matched routes count through their own hook, the rest through the 404 handler's: once each.
    const duration = 'relayplane_http_request_duration_seconds_count';
    const routeOnly = { method: 'GET', route: '/admin/v1/projects/:project_id/api-keys' };
    expect(sampleValue(text, duration, routeOnly) - sampleValue(before, duration, routeOnly)).toBe(1);
    expect(
      sampleValue(text, duration, { method: 'GET', route: 'unmatched' }) -
        sampleValue(before, duration, { method: 'GET', route: 'unmatched' }),
    ).toBe(1);
    for (const value of [
      projectId,
      tenantId,
      apiKey,
      'sekrit-value',
      '/no/such/path',
      session.authorization,
    ]) {
      expect(text).not.toContain(value);
    }
    // The one bounded exception (docs/metrics.md): the issuer's two per-tenant slot gauges name
    // the tenants nearest their cap. No other line of its metrics may carry a tenant id.
    const tenantLines = (await scrape(issuerUrl)).split('\n').filter((line) => line.includes(tenantId));
    for (const line of tenantLines) {
      expect(line).toMatch(/^relayplane_tenant_(slots_in_use|slot_cap)\{/);
    }
  });
});

/** Rows of the table in docs/metrics.md whose header starts with `| metric |`. */
function documentedMetrics(): Map<string, { type: string; labels: string[] }> {
  const doc = readFileSync(fileURLToPath(new URL('../../../docs/metrics.md', import.meta.url)), 'utf8');
  const lines = doc.split('\n');
  const header = lines.findIndex((l) => /^\|\s*metric\s*\|/.test(l));
  if (header < 0) throw new Error('docs/metrics.md has no table starting with "| metric |"');
  const rows = new Map<string, { type: string; labels: string[] }>();
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const [name = '', type = '', labels = ''] = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim().replace(/`/g, ''));
    if (rows.has(name)) throw new Error(`${name} is documented twice`);
    rows.set(name, { type, labels: labels ? labels.split(',').map((l) => l.trim()) : [] });
  }
  return rows;
}

describe('docs/metrics.md', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack('gw_metrics_doc');
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('documents every relayplane_ metric of the four apps with its type and labels, and nothing else', () => {
    const registries: Registry[] = [
      stack.metrics,
      stack.issuer.metrics,
      stack.admin.metrics,
      stack.billing.metrics,
    ];
    const defined = new Map<string, { type: string; labels: string[] }>();
    for (const registry of registries) {
      for (const metric of registry.getMetricsAsArray() as unknown as {
        name: string;
        type: string;
        labelNames: string[];
      }[]) {
        if (!metric.name.startsWith('relayplane_')) continue;
        defined.set(metric.name, { type: metric.type, labels: [...metric.labelNames] });
      }
    }
    const documented = documentedMetrics();
    expect([...documented.keys()].sort()).toEqual([...defined.keys()].sort());
    for (const [name, metric] of defined) {
      expect(documented.get(name), name).toEqual(metric);
    }
  });
});

describe('gateway service: GATEWAY_METRICS_ADDRESS', () => {
  const services = {
    GATEWAY_ADMIN_ADDRESS: '127.0.0.1:1',
    GATEWAY_ISSUER_ADDRESS: '127.0.0.1:1',
    GATEWAY_BILLING_ADDRESS: '127.0.0.1:1',
  };

  it('is unset by default (no metrics listener) and read as host:port when set', () => {
    expect(readGatewayConfig({}).metricsAddress).toBeUndefined();
    expect(readGatewayConfig({ GATEWAY_METRICS_ADDRESS: '   ' }).metricsAddress).toBeUndefined();
    expect(readGatewayConfig({ GATEWAY_METRICS_ADDRESS: '0.0.0.0:9464' }).metricsAddress).toBe(
      '0.0.0.0:9464',
    );
    expect(readGatewayConfig({ GATEWAY_METRICS_ADDRESS: '[::]:9464' }).metricsAddress).toBe('[::]:9464');
  });

  it.each(['9464', 'localhost', 'http://0.0.0.0:9464', '0.0.0.0:port', '0.0.0.0:9464/metrics'])(
    'refuses %s, naming the variable',
    (value) => {
      const read = () => readGatewayConfig({ GATEWAY_METRICS_ADDRESS: value });
      expect(read).toThrow(ConfigError);
      expect(read).toThrow(/GATEWAY_METRICS_ADDRESS must be host:port/);
    },
  );

  it('a service with the variable set serves its metrics (with process metrics) until destroyed', async () => {
    const gateway = await GatewayService.create(
      readGatewayConfig({ ...services, PORT: '0', GATEWAY_METRICS_ADDRESS: '127.0.0.1:0' }),
      { logger: testLogger('gateway') },
    );
    let destroyed = false;
    try {
      await gateway.start();
      const port = gateway.metricsPort;
      expect(port).toBeGreaterThan(0);
      const url = `http://127.0.0.1:${port}/metrics`;
      expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
      const text = await scrape(url);
      expect(sampleValue(text, REQUESTS, { method: 'GET', route: '/healthz', status: '200' })).toBe(1);
      expect(hasMetric(text, 'process_cpu_user_seconds_total', 'counter')).toBe(true);
      await gateway.destroy();
      destroyed = true;
      await expect(fetch(url)).rejects.toThrow();
    } finally {
      if (!destroyed) await gateway.destroy();
    }
  });

  it('a service without the variable starts no metrics listener', async () => {
    const gateway = await GatewayService.create(readGatewayConfig({ ...services, PORT: '0' }), {
      logger: testLogger('gateway'),
    });
    try {
      await gateway.start();
      expect(gateway.metricsPort).toBeUndefined();
    } finally {
      await gateway.destroy();
    }
  });
});
