import { once } from 'node:events';
import { createServer } from 'node:net';
import { AppError } from '@relayplane/contract/errors';
import { BillingService } from '@relayplane/proto/billing';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { createLogger } from '@relayplane/shared/logger';
import {
  counter,
  createRegistry,
  DURATION_BUCKETS,
  gauge,
  histogram,
  type MetricsServer,
  type Registry,
  serveMetrics,
} from '@relayplane/shared/metrics';
import { connect, RpcServer, type ServiceClient, type ServiceImpl } from '@relayplane/shared/rpc';
import {
  register as globalRegistry,
  Counter as PromCounter,
  Histogram as PromHistogram,
  Registry as PromRegistry,
} from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { hasMetric, samples, sampleValue, scrape } from '../../src/metrics.ts';
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

describe('metrics: own counters and histograms (bound once, exposed as prom-client exposes its own)', () => {
  const observations = [0, 0.0004, 0.001, 0.0011, 0.007, 0.25, 0.2500001, 42, 299.9, 300, 301, 1e6];

  it('a histogram exposes the same text as prom-client for the same observations, labelled and not', async () => {
    const ours = createRegistry();
    const theirs = new PromRegistry();
    const labelled = histogram(ours, {
      name: 'relayplane_t_seconds',
      help: 'h',
      labelNames: ['method', 'route'],
    });
    const plain = histogram(ours, { name: 'relayplane_t_plain_seconds', help: 'p', buckets: [0.1, 0.5, 2] });
    const promLabelled = new PromHistogram({
      name: 'relayplane_t_seconds',
      help: 'h',
      labelNames: ['method', 'route'],
      buckets: [...DURATION_BUCKETS],
      registers: [theirs],
    });
    const promPlain = new PromHistogram({
      name: 'relayplane_t_plain_seconds',
      help: 'p',
      buckets: [0.1, 0.5, 2],
      registers: [theirs],
    });
    // Bound but never observed: not exposed by either.
    labelled.labels('GET', '/never');
    promLabelled.labels('GET', '/never');
    const get = labelled.labels('GET', '/v1/x/:id');
    const post = labelled.labels('POST', 'a "quoted" \\ route\n');
    for (const [i, v] of observations.entries()) {
      get.observe(v);
      promLabelled.labels('GET', '/v1/x/:id').observe(v);
      if (i % 2 === 0) {
        post.observe(v);
        promLabelled.labels('POST', 'a "quoted" \\ route\n').observe(v);
      }
      plain.observe(v);
      promPlain.observe(v);
    }
    const text = await ours.metrics();
    expect(text).toBe(await theirs.metrics());
    expect(text).toContain('relayplane_t_seconds_bucket{le="0.001",method="GET",route="/v1/x/:id"} 3');
    expect(text).toContain('relayplane_t_seconds_bucket{le="+Inf",method="GET",route="/v1/x/:id"} 12');
    expect(text).toContain('relayplane_t_plain_seconds_bucket{le="0.1"} 5');
    expect(text).not.toContain('/never');
  });

  it('buckets given out of order are exposed in order (prom-client would expose them as given)', async () => {
    const registry = createRegistry();
    const h = histogram(registry, { name: 'relayplane_order_seconds', help: 'o', buckets: [2, 0.1, 0.5] });
    h.observe(0.3);
    const buckets = (await registry.metrics())
      .split('\n')
      .filter((l) => l.startsWith('relayplane_order_seconds_bucket'));
    expect(buckets).toEqual([
      'relayplane_order_seconds_bucket{le="0.1"} 0',
      'relayplane_order_seconds_bucket{le="0.5"} 1',
      'relayplane_order_seconds_bucket{le="2"} 1',
      'relayplane_order_seconds_bucket{le="+Inf"} 1',
    ]);
  });

  it('an unobserved histogram without labels is exposed with zeros, as prom-client does', async () => {
    const ours = createRegistry();
    const theirs = new PromRegistry();
    histogram(ours, { name: 'relayplane_idle_seconds', help: 'i', buckets: [1, 2] });
    new PromHistogram({ name: 'relayplane_idle_seconds', help: 'i', buckets: [1, 2], registers: [theirs] });
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('relayplane_idle_seconds_count 0');
  });

  it('a counter exposes the same text as prom-client, labelled and not; a bound, uncounted set is not shown', async () => {
    const ours = createRegistry();
    const theirs = new PromRegistry();
    const results = counter(ours, { name: 'relayplane_t_total', help: 'c', labelNames: ['result'] });
    const plain = counter(ours, { name: 'relayplane_t_plain_total', help: 'p' });
    const promResults = new PromCounter({
      name: 'relayplane_t_total',
      help: 'c',
      labelNames: ['result'],
      registers: [theirs],
    });
    new PromCounter({ name: 'relayplane_t_plain_total', help: 'p', registers: [theirs] });
    results.labels('unused');
    const ok = results.labels('ok');
    ok.inc();
    ok.inc(2.5);
    results.labels('fail').inc(0);
    promResults.labels('ok').inc();
    promResults.labels('ok').inc(2.5);
    promResults.labels('fail').inc(0);
    // prom-client exposes the unlabelled counter at 0 before any inc; so does ours.
    expect(await ours.metrics()).toBe(await theirs.metrics());
    plain.inc();
    expect(await ours.metrics()).toContain('relayplane_t_plain_total 1\n');
    expect(await ours.metrics()).toContain('relayplane_t_total{result="ok"} 3.5');
    expect(await ours.metrics()).not.toContain('unused');
  });

  it('binding the same label values twice gives the same child, counting into one series', async () => {
    const registry = createRegistry();
    const c = counter(registry, { name: 'relayplane_same_total', help: 'c', labelNames: ['a', 'b'] });
    expect(c.labels('x', 'y')).toBe(c.labels('x', 'y'));
    // Label values are not joined ambiguously: ("x y", "") and ("x", "y ") stay apart.
    c.labels('x y', '').inc();
    c.labels('x', 'y ').inc(2);
    const text = await registry.metrics();
    expect(text).toContain('relayplane_same_total{a="x y",b=""} 1');
    expect(text).toContain('relayplane_same_total{a="x",b="y "} 2');
  });

  it('refuses what prom-client refuses: a decrease, a non-finite value, a wrong label count', () => {
    const registry = createRegistry();
    const c = counter(registry, { name: 'relayplane_refuse_total', help: 'c' });
    const labelled = counter(registry, { name: 'relayplane_refuse_l_total', help: 'c', labelNames: ['k'] });
    const h = histogram(registry, { name: 'relayplane_refuse_seconds', help: 'h', labelNames: ['k'] });
    expect(() => c.inc(-1)).toThrow(/only goes up/);
    expect(() => c.inc(Number.NaN)).toThrow(/only goes up/);
    expect(() => c.inc(Number.POSITIVE_INFINITY)).toThrow(/only goes up/);
    expect(() => h.labels('a').observe(Number.NaN)).toThrow(/finite/);
    expect(() => h.labels('a').observe(Number.NEGATIVE_INFINITY)).toThrow(/finite/);
    expect(() => labelled.labels()).toThrow(/takes 1 label value\(s\) \(k\), got 0/);
    expect(() => labelled.labels('a', 'b')).toThrow(/got 2/);
    expect(() => labelled.inc()).toThrow(/has label names/);
    expect(() => h.observe(1)).toThrow(/has label names/);
    expect(() => histogram(registry, { name: 'relayplane_bad_seconds', help: 'h', buckets: [1, 1] })).toThrow(
      /distinct finite/,
    );
    expect(() =>
      histogram(registry, { name: 'relayplane_le_seconds', help: 'h', labelNames: ['le'] as never[] }),
    ).toThrow(/reserved/);
  });

  it('resetMetrics zeroes every series; bound children keep counting into the registry afterwards', async () => {
    const registry = createRegistry();
    const c = counter(registry, { name: 'relayplane_reset_total', help: 'c', labelNames: ['k'] });
    const h = histogram(registry, {
      name: 'relayplane_reset_seconds',
      help: 'h',
      labelNames: ['k'],
      buckets: [1],
    });
    const child = c.labels('a');
    const hc = h.labels('a');
    child.inc(5);
    hc.observe(0.5);
    registry.resetMetrics();
    let text = await registry.metrics();
    expect(text).not.toContain('relayplane_reset_total{');
    expect(text).not.toContain('relayplane_reset_seconds_count{');
    child.inc();
    hc.observe(2);
    text = await registry.metrics();
    expect(text).toContain('relayplane_reset_total{k="a"} 1');
    expect(text).toContain('relayplane_reset_seconds_bucket{le="1",k="a"} 0');
    expect(text).toContain('relayplane_reset_seconds_count{k="a"} 1');
    expect(text).toContain('relayplane_reset_seconds_sum{k="a"} 2');
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
    // The timer that would force the connection closed (after 2 s) is made on a clock that never
    // moves: close() returns only if it closes the idle connection itself, however slow the machine.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let closing: Promise<void>;
    try {
      closing = server.close();
    } finally {
      vi.useRealTimers();
    }
    await within('close', closing);
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
    async getSubscriptions() {
      throw new AppError('not_found', 'not exercised');
    },
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
