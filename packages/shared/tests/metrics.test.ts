import { once } from 'node:events';
import { createServer } from 'node:net';
import { BillingService } from '@relayplane/proto/billing';
import { hasMetric, samples, sampleValue, scrape } from '@relayplane/testing/metrics';
import { register as globalRegistry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../src/errors.ts';
import { HealthService, ServingStatus } from '../src/health.ts';
import { createLogger } from '../src/logger.ts';
import {
  counter,
  createRegistry,
  gauge,
  histogram,
  type MetricsServer,
  type Registry,
  serveMetrics,
} from '../src/metrics.ts';
import { connect, RpcServer, type ServiceClient, type ServiceImpl } from '../src/rpc.ts';
import { within } from './conformance/wait.ts';

const logger = createLogger({ level: 'silent', service: 'metrics-test' });

async function eventually(what: string, condition: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('metrics: serveMetrics over real HTTP', () => {
  let registry: Registry;
  let server: MetricsServer;
  let base: string;

  beforeAll(async () => {
    registry = createRegistry();
    server = await serveMetrics('127.0.0.1:0', registry, logger);
    base = `http://127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    await server?.close();
  });

  it('listening on port 0 reports the bound port', () => {
    expect(server.port).toBeGreaterThan(0);
  });

  it('GET /metrics answers the text exposition with the registry content type, and counters move', async () => {
    const jobs = counter(registry, {
      name: 'relayplane_test_jobs_total',
      help: 'Jobs done in the test.',
      labelNames: ['result'],
    });
    const ok = jobs.labels('ok');
    ok.inc();
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(registry.contentType);
    const first = await res.text();
    expect(first).toContain('# HELP relayplane_test_jobs_total Jobs done in the test.');
    expect(hasMetric(first, 'relayplane_test_jobs_total', 'counter')).toBe(true);
    expect(sampleValue(first, 'relayplane_test_jobs_total', { result: 'ok' })).toBe(1);
    ok.inc(2);
    jobs.labels('failed').inc();
    const second = await scrape(`${base}/metrics`);
    expect(sampleValue(second, 'relayplane_test_jobs_total', { result: 'ok' })).toBe(3);
    expect(sampleValue(second, 'relayplane_test_jobs_total', { result: 'failed' })).toBe(1);
  });

  it('gauges and histograms appear with their samples', async () => {
    const open = gauge(registry, { name: 'relayplane_test_open', help: 'Open things.' });
    open.inc();
    open.inc();
    open.dec();
    const seconds = histogram(registry, {
      name: 'relayplane_test_seconds',
      help: 'Durations.',
      labelNames: ['kind'],
      buckets: [0.1, 1],
    });
    seconds.labels('a').observe(0.05);
    seconds.labels('a').observe(0.5);
    const text = await scrape(`${base}/metrics`);
    expect(hasMetric(text, 'relayplane_test_open', 'gauge')).toBe(true);
    expect(sampleValue(text, 'relayplane_test_open')).toBe(1);
    expect(hasMetric(text, 'relayplane_test_seconds', 'histogram')).toBe(true);
    expect(sampleValue(text, 'relayplane_test_seconds_bucket', { kind: 'a', le: '0.1' })).toBe(1);
    expect(sampleValue(text, 'relayplane_test_seconds_bucket', { kind: 'a', le: '1' })).toBe(2);
    expect(sampleValue(text, 'relayplane_test_seconds_bucket', { kind: 'a', le: '+Inf' })).toBe(2);
    expect(sampleValue(text, 'relayplane_test_seconds_count', { kind: 'a' })).toBe(2);
    expect(sampleValue(text, 'relayplane_test_seconds_sum', { kind: 'a' })).toBeCloseTo(0.55, 6);
  });

  it('a query string does not change the answer', async () => {
    const res = await fetch(`${base}/metrics?name[]=x`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('relayplane_test_jobs_total');
  });

  it.each(['/', '/metric', '/metrics/', '/metrics/x', '/health'])(
    'GET %s answers 404 {"error":"not found"}',
    async (path) => {
      const res = await fetch(`${base}${path}`);
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await res.json()).toEqual({ error: 'not found' });
    },
  );

  it.each(['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'])(
    '%s /metrics answers 405 with an Allow header',
    async (method) => {
      const res = await fetch(`${base}/metrics`, { method });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
      expect(await res.json()).toEqual({ error: 'method not allowed' });
    },
  );

  it('POST elsewhere answers 404, not 405', async () => {
    const res = await fetch(`${base}/other`, { method: 'POST' });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: 'not found' });
  });

  it('HEAD /metrics answers 200 without a body', async () => {
    const res = await fetch(`${base}/metrics`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(registry.contentType);
    expect(await res.text()).toBe('');
  });
});

describe('metrics: registries', () => {
  it('each registry is separate, and none uses the global default registry', async () => {
    const a = createRegistry();
    const b = createRegistry();
    counter(a, { name: 'relayplane_only_in_a_total', help: 'a' }).inc();
    expect(await a.getSingleMetricAsString('relayplane_only_in_a_total')).toContain(
      'relayplane_only_in_a_total 1',
    );
    expect(b.getSingleMetric('relayplane_only_in_a_total')).toBeUndefined();
    expect(globalRegistry.getSingleMetric('relayplane_only_in_a_total')).toBeUndefined();
  });

  it('asking twice for the same metric returns the same one instead of failing', () => {
    const registry = createRegistry();
    const first = counter(registry, { name: 'relayplane_twice_total', help: 'x', labelNames: ['k'] });
    const second = counter(registry, { name: 'relayplane_twice_total', help: 'x', labelNames: ['k'] });
    expect(second).toBe(first);
    expect(gauge(registry, { name: 'relayplane_g', help: 'g' })).toBe(
      gauge(registry, { name: 'relayplane_g', help: 'g' }),
    );
    expect(histogram(registry, { name: 'relayplane_h', help: 'h' })).toBe(
      histogram(registry, { name: 'relayplane_h', help: 'h' }),
    );
  });

  it('default metrics (process and Node.js) are collected only when asked for', async () => {
    const withDefaults = await createRegistry({ defaultMetrics: true }).metrics();
    expect(hasMetric(withDefaults, 'process_cpu_user_seconds_total', 'counter')).toBe(true);
    expect(hasMetric(withDefaults, 'nodejs_heap_size_used_bytes', 'gauge')).toBe(true);
    expect(hasMetric(withDefaults, 'nodejs_eventloop_lag_seconds', 'gauge')).toBe(true);
    const without = await createRegistry().metrics();
    expect(without).not.toContain('process_cpu_user_seconds_total');
  });
});

describe('metrics: listener lifecycle', () => {
  it('close() frees the port: the endpoint stops answering and the port can be bound again', async () => {
    const server = await serveMetrics('127.0.0.1:0', createRegistry(), logger);
    const url = `http://127.0.0.1:${server.port}/metrics`;
    expect((await fetch(url)).status).toBe(200);
    await server.close();
    await expect(fetch(url)).rejects.toThrow();
    const probe = createServer();
    probe.listen(server.port, '127.0.0.1');
    await once(probe, 'listening');
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  });

  it('close() does not wait for an idle keep-alive connection', async () => {
    const server = await serveMetrics('127.0.0.1:0', createRegistry(), logger);
    // fetch keeps the connection alive after the answer.
    expect((await fetch(`http://127.0.0.1:${server.port}/metrics`)).status).toBe(200);
    const started = performance.now();
    await within('close', server.close());
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('a port already in use is refused with the listen error', async () => {
    const first = await serveMetrics('127.0.0.1:0', createRegistry(), logger);
    try {
      await expect(serveMetrics(`127.0.0.1:${first.port}`, createRegistry(), logger)).rejects.toMatchObject({
        code: 'EADDRINUSE',
      });
    } finally {
      await first.close();
    }
  });

  it('an IPv6 host in brackets is accepted', async () => {
    const server = await serveMetrics('[::1]:0', createRegistry(), logger).catch((err: unknown) => err);
    // Hosts without IPv6 loopback refuse the address; anything else must have listened.
    if (server instanceof Error) {
      expect((server as NodeJS.ErrnoException).code).toMatch(/EADDRNOTAVAIL|EAFNOSUPPORT/);
      return;
    }
    const s = server as MetricsServer;
    try {
      expect((await fetch(`http://[::1]:${s.port}/metrics`)).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe('metrics: gRPC server calls (RpcServer with a registry)', () => {
  const impl: ServiceImpl<typeof BillingService> = {
    async listPlans() {
      return { plans: [] };
    },
    async getPricing() {
      throw new Error('boom');
    },
    async getSubscription() {
      throw new AppError('not_found', 'no subscription');
    },
    async setPlan() {
      throw new AppError('rate_limited', 'try later', { retryAfterSeconds: 1 });
    },

    // Not exercised here.
    async getEntitlements() {
      throw new AppError('not_found', 'not exercised');
    },
    async createCheckoutSession() {
      throw new AppError('not_found', 'not exercised');
    },
    async getCheckoutSession() {
      throw new AppError('not_found', 'not exercised');
    },
    async completeCheckoutSession() {
      throw new AppError('not_found', 'not exercised');
    },
    async handleWebhook() {
      throw new AppError('not_found', 'not exercised');
    },
    async getUsage() {
      throw new AppError('not_found', 'not exercised');
    },
  };
  const service = BillingService.typeName;
  let registry: Registry;
  let rpc: RpcServer;
  let client: ServiceClient<typeof BillingService>;

  beforeAll(async () => {
    registry = createRegistry();
    rpc = new RpcServer(logger, { metrics: registry });
    rpc.add(BillingService, impl);
    await rpc.listen('127.0.0.1:0');
    client = connect(BillingService, `127.0.0.1:${rpc.port}`);
  });

  afterAll(async () => {
    client?.close();
    await rpc?.close(1_000);
  });

  it('counts unary calls by status code and times them', async () => {
    await client.listPlans({});
    await client.listPlans({});
    await expect(client.getSubscription({ tenantId: 'ten_1' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(client.getPricing({})).rejects.toMatchObject({ code: 'internal' });
    await expect(client.setPlan({ tenantId: 'ten_1', planId: 'pro' })).rejects.toMatchObject({
      code: 'rate_limited',
    });
    const text = await registry.metrics();
    expect(hasMetric(text, 'relayplane_grpc_server_handled_total', 'counter')).toBe(true);
    expect(hasMetric(text, 'relayplane_grpc_server_handling_seconds', 'histogram')).toBe(true);
    const value = (method: string, code: string) =>
      sampleValue(text, 'relayplane_grpc_server_handled_total', { service, method, code });
    expect(value('ListPlans', 'OK')).toBe(2);
    expect(value('GetSubscription', 'NOT_FOUND')).toBe(1);
    expect(value('GetPricing', 'INTERNAL')).toBe(1);
    // (UNAVAILABLE is not used here: the client's retry policy would call the server again.)
    expect(value('SetPlan', 'RESOURCE_EXHAUSTED')).toBe(1);
    expect(value('ListPlans', 'INTERNAL')).toBe(0);
    expect(
      sampleValue(text, 'relayplane_grpc_server_handling_seconds_count', { service, method: 'ListPlans' }),
    ).toBe(2);
    expect(
      sampleValue(text, 'relayplane_grpc_server_handling_seconds_count', { service, method: 'GetPricing' }),
    ).toBe(1);
    // Only bounded labels: no tenant id, no message text.
    expect(text).not.toContain('ten_1');
    expect(text).not.toContain('boom');
  });

  it('counts a streaming call once, at its end', async () => {
    const health = connect(HealthService, `127.0.0.1:${rpc.port}`, { timeoutMs: 10_000 });
    const abort = new AbortController();
    const hs = 'grpc.health.v1.Health';
    const watchCount = async () =>
      samples(await registry.metrics())
        .filter((s) => s.name === 'relayplane_grpc_server_handled_total' && s.labels.method === 'Watch')
        .reduce((sum, s) => sum + s.value, 0);
    try {
      const stream = health.watch({ service: '' }, { signal: abort.signal })[Symbol.asyncIterator]();
      expect((await within('the first status', stream.next())).value?.status).toBe(ServingStatus.SERVING);
      rpc.health.set('', ServingStatus.NOT_SERVING);
      expect((await within('the second status', stream.next())).value?.status).toBe(
        ServingStatus.NOT_SERVING,
      );
      // Two messages sent, the call still open: nothing counted yet.
      expect(await watchCount()).toBe(0);
      abort.abort();
      await stream.next().catch(() => {});
      await eventually('the Watch call to be counted', async () => (await watchCount()) > 0);
      const text = await registry.metrics();
      expect(
        sampleValue(text, 'relayplane_grpc_server_handled_total', {
          service: hs,
          method: 'Watch',
          code: 'CANCELLED',
        }),
      ).toBe(1);
      expect(await watchCount()).toBe(1);
      expect(
        sampleValue(text, 'relayplane_grpc_server_handling_seconds_count', { service: hs, method: 'Watch' }),
      ).toBe(1);
      // Unary health checks are counted too.
      await health.check({ service: '' });
      expect(
        sampleValue(await registry.metrics(), 'relayplane_grpc_server_handled_total', {
          service: hs,
          method: 'Check',
          code: 'OK',
        }),
      ).toBe(1);
    } finally {
      rpc.health.set('', ServingStatus.SERVING);
      abort.abort();
      health.close();
    }
  });

  it('a server without a registry keeps no metrics and still serves', async () => {
    const plain = new RpcServer(logger);
    plain.add(BillingService, impl);
    await plain.listen('127.0.0.1:0');
    const c = connect(BillingService, `127.0.0.1:${plain.port}`);
    try {
      expect((await c.listPlans({})).plans).toEqual([]);
    } finally {
      c.close();
      await plain.close(1_000);
    }
  });
});
