import { createServer, connect as dial, type Socket } from 'node:net';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError, ERROR_CODES, type ErrorCode } from '@relayplane/contract/errors';
import { BillingService, type GetSubscriptionResponseSchema, PlanSchema } from '@relayplane/proto/billing';
import type { CallInfo } from '@relayplane/proto/grpc';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { createLogger } from '@relayplane/shared/logger';
import { currentRequestContext, runWithRequestContext } from '@relayplane/shared/request-context';
import { connect, RpcServer, type ServiceClient, type ServiceImpl } from '@relayplane/shared/rpc';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitFor, within } from './conformance/wait.ts';

type Billing = typeof BillingService;
type GetSubscription = (
  req: { tenantId: string },
  call: CallInfo,
) => Promise<MessageInitShape<typeof GetSubscriptionResponseSchema>>;

const UPDATED_AT = new Date('2026-11-22T12:00:00Z');

/** A fake billing service; each test decides what GetSubscription does. */
function fakeBilling(behaviour: { getSubscription: GetSubscription }): ServiceImpl<Billing> {
  return {
    async listPlans() {
      return {
        plans: [
          {
            id: 'pro',
            name: 'Pro',
            limits: { maxConcurrentConnections: 1000, maxCredentialTtlSeconds: 3600 },
            price: { currency: 'usd', monthlyAmountMinor: 4900, contactSales: false },
          },
          { id: 'enterprise', name: 'Enterprise', price: { currency: 'usd', contactSales: true } },
        ],
      };
    },
    async getPricing() {
      // What an unexpected failure looks like: internal detail in the message.
      throw new Error('connect ECONNREFUSED 10.0.0.7:5432 password=hunter2');
    },
    getSubscription: (req, call) => behaviour.getSubscription(req, call),
    async setPlan(req) {
      return {
        subscription: {
          tenantId: req.tenantId,
          planId: req.planId,
          updatedAt: timestampFromDate(UPDATED_AT),
        },
      };
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
}

/**
 * Both transports a client can reach a server by: gRPC (over loopback here) and the
 * in-process transport of the embedded mode. Every behaviour below must be the same over
 * both: a handler cannot tell which one called it, nor a caller which one answered.
 */
const TRANSPORTS = [
  { name: 'gRPC', address: () => '127.0.0.1:0', nowhere: '127.0.0.1:1' },
  {
    name: 'the in-process transport',
    address: () => `in-process:rpc-test-${Math.random().toString(36).slice(2)}`,
    nowhere: 'in-process:nobody-listens-here',
  },
] as const;
type Transport = (typeof TRANSPORTS)[number];

const targets = new WeakMap<RpcServer, string>();
/** Listens on the transport's address; answers the target clients dial. */
async function listenOn(server: RpcServer, transport: Transport): Promise<string> {
  const address = transport.address();
  const port = await server.listen(address);
  const target = address.startsWith('in-process:') ? address : `127.0.0.1:${port}`;
  targets.set(server, target);
  return target;
}
function targetOf(server: RpcServer): string {
  const target = targets.get(server);
  if (!target) throw new Error('the server is not listening');
  return target;
}

describe.each(TRANSPORTS)('rpc: RpcServer and connect() over $name', (transport) => {
  const logLines: Record<string, unknown>[] = [];
  const logger = createLogger(
    { level: 'info', service: 'rpc-test' },
    { write: (line: string) => logLines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const behaviour: { getSubscription: GetSubscription } = { getSubscription: async () => ({}) };
  let server: RpcServer;
  let client: ServiceClient<Billing>;
  let fastClient: ServiceClient<Billing>;

  beforeAll(async () => {
    server = new RpcServer(logger);
    server.add(BillingService, fakeBilling(behaviour));
    const target = await listenOn(server, transport);
    client = connect(BillingService, target);
    fastClient = connect(BillingService, target, { timeoutMs: 200 });
  });

  afterAll(async () => {
    client?.close();
    fastClient?.close();
    await server?.close(1_000);
  });

  beforeEach(() => {
    logLines.length = 0;
  });

  it('listen on port 0 reports the bound port; an in-process server has none', () => {
    if (transport.name === 'gRPC') expect(server.port).toBeGreaterThan(0);
    else expect(server.port).toBe(0);
  });

  it('round-trips typed messages, nested messages and well-known types', async () => {
    const { plans } = await client.listPlans({});
    expect(plans).toHaveLength(2);
    expect(plans[0]?.$typeName).toBe(PlanSchema.typeName);
    expect(plans[0]).toEqual(
      create(PlanSchema, {
        id: 'pro',
        name: 'Pro',
        limits: { maxConcurrentConnections: 1000, maxCredentialTtlSeconds: 3600 },
        price: { currency: 'usd', monthlyAmountMinor: 4900 },
      }),
    );
    expect(plans[1]?.price?.contactSales).toBe(true);
    expect(plans[1]?.limits).toBeUndefined();
    const { subscription } = await client.setPlan({ tenantId: 'ten_1', planId: 'pro' });
    expect(subscription?.tenantId).toBe('ten_1');
    expect(subscription?.updatedAt?.seconds).toBe(BigInt(UPDATED_AT.getTime() / 1000));
  });

  it.each(Object.keys(ERROR_CODES) as ErrorCode[])(
    'an AppError with code %s thrown in a handler arrives as an AppError with the same code, message and retry hint',
    async (code) => {
      behaviour.getSubscription = async () => {
        throw new AppError(code, `message for ${code}`, { retryAfterSeconds: 7 });
      };
      const err = await client.getSubscription({ tenantId: 'ten_1' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect(err).toMatchObject({ code, message: `message for ${code}`, retryAfterSeconds: 7 });
    },
  );

  it('a call answered unavailable is tried twice more (the channel retry policy); other codes are not retried', async () => {
    let calls = 0;
    behaviour.getSubscription = async () => {
      calls++;
      if (calls < 3) throw new AppError('unavailable', 'away for now');
      return { subscription: { tenantId: `answered at call ${calls}` } };
    };
    const res = await client.getSubscription({ tenantId: 'ten_1' });
    expect(res.subscription?.tenantId).toBe('answered at call 3');

    calls = 0;
    behaviour.getSubscription = async () => {
      calls++;
      throw new AppError('unavailable', 'still away');
    };
    await expect(client.getSubscription({ tenantId: 'ten_1' })).rejects.toMatchObject({
      code: 'unavailable',
      message: 'still away',
    });
    expect(calls).toBe(3);

    calls = 0;
    behaviour.getSubscription = async () => {
      calls++;
      throw new AppError('conflict', 'not retried');
    };
    await expect(client.getSubscription({ tenantId: 'ten_1' })).rejects.toMatchObject({ code: 'conflict' });
    expect(calls).toBe(1);
  });

  it('an AppError without a retry hint arrives without one', async () => {
    behaviour.getSubscription = async () => {
      throw new AppError('not_found', 'no subscription');
    };
    const err = await client.getSubscription({ tenantId: 'ten_1' }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'not_found',
      message: 'no subscription',
      retryAfterSeconds: undefined,
    });
  });

  it('any other error arrives as internal / "internal error" with nothing internal, and is logged on the server', async () => {
    const err = await client.getPricing({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'internal', message: 'internal error' });
    const crossed = err as AppError & { cause?: { details?: string; metadata?: unknown } };
    expect(JSON.stringify({ message: crossed.message, details: crossed.cause?.details })).not.toMatch(
      /hunter2|ECONNREFUSED|10\.0\.0\.7/,
    );
    expect(logLines.some((l) => l.rpc === 'GetPricing' && JSON.stringify(l).includes('ECONNREFUSED'))).toBe(
      true,
    );
    // The password in the message is not redacted by key; it must not be echoed anywhere but the server log.
  });

  // How late after its deadline a call fails depends on the machine's load; what these two tests
  // bound is which deadline ended the call: the handler never answers, and the client's default
  // deadline (5 s) would end it only after the bound.
  it('a handler slower than the deadline fails with unavailable at the client’s deadline, not the default one, and the handler is told', async () => {
    let aborted = false;
    behaviour.getSubscription = async (_req, call) => {
      await new Promise<void>((resolve) => {
        call.signal.addEventListener('abort', () => {
          aborted = true;
          resolve();
        });
      });
      return {};
    };
    const started = performance.now();
    const err = await fastClient.getSubscription({ tenantId: 'ten_1' }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'unavailable', message: 'BillingService is unavailable' });
    expect(elapsed).toBeGreaterThanOrEqual(180);
    expect(elapsed).toBeLessThan(4_000);
    await waitFor('the handler to see the deadline', () => aborted, 2_000);
  });

  it('an explicit deadline on the call wins over the client default', async () => {
    behaviour.getSubscription = () => new Promise(() => {});
    const started = performance.now();
    const err = await client
      .getSubscription({ tenantId: 'ten_1' }, { deadline: new Date(Date.now() + 150) })
      .catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(err).toMatchObject({ code: 'unavailable' });
    expect(elapsed).toBeGreaterThanOrEqual(130);
    expect(elapsed).toBeLessThan(4_000);
  });

  it('a call to an address nobody listens on fails with unavailable', async () => {
    const nowhere = connect(BillingService, transport.nowhere, { timeoutMs: 2_000 });
    try {
      const err = await nowhere.listPlans({}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect(err).toMatchObject({ code: 'unavailable', retryAfterSeconds: 1 });
    } finally {
      nowhere.close();
    }
  });

  it('the request id of the caller is the request id inside the server handler', async () => {
    behaviour.getSubscription = async () => ({
      subscription: { tenantId: currentRequestContext()?.requestId ?? 'none' },
    });
    const res = await runWithRequestContext({ requestId: 'req-0123456789' }, () =>
      client.getSubscription({ tenantId: 'ten_1' }),
    );
    expect(res.subscription?.tenantId).toBe('req-0123456789');
  });

  it('the server makes up a request id when the caller sent none or an unsafe one', async () => {
    behaviour.getSubscription = async () => ({
      subscription: { tenantId: currentRequestContext()?.requestId ?? 'none' },
    });
    const none = await client.getSubscription({ tenantId: 'ten_1' });
    const unsafe = await runWithRequestContext({ requestId: 'evil\nid with spaces' }, () =>
      client.getSubscription({ tenantId: 'ten_1' }),
    );
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    expect(none.subscription?.tenantId).toMatch(uuid);
    expect(unsafe.subscription?.tenantId).toMatch(uuid);
  });

  it("the client's address, user agent and actor travel with the call; unsafe ones do not", async () => {
    behaviour.getSubscription = async () => {
      const ctx = currentRequestContext();
      return { subscription: { tenantId: JSON.stringify([ctx?.clientIp, ctx?.userAgent, ctx?.actor]) } };
    };
    const seen = async (ctx: Parameters<typeof runWithRequestContext>[0]) => {
      const res = await runWithRequestContext(ctx, () => client.getSubscription({ tenantId: 'ten_1' }));
      return JSON.parse(res.subscription?.tenantId ?? 'null') as unknown[];
    };
    expect(
      await seen({
        requestId: 'req-ctx-1',
        clientIp: '::ffff:203.0.113.7',
        userAgent: 'relayplane-cli/1.0 (Linux) \u00e9t\u00e9',
        actor: { type: 'cli', id: 'usr_0123' },
      }),
    ).toEqual(['::ffff:203.0.113.7', 'relayplane-cli/1.0 (Linux) ?t?', { type: 'cli', id: 'usr_0123' }]);
    expect(
      await seen({
        requestId: 'req-ctx-2',
        clientIp: '203.0.113.7\nX-Evil: 1',
        userAgent: 'x'.repeat(300),
        actor: { type: 'root' as 'user', id: 'usr_1' },
      }),
    ).toEqual([null, 'x'.repeat(256), null]);
  });

  it('server log lines written inside a handler carry the request id', async () => {
    behaviour.getSubscription = async () => {
      logger.info('inside handler');
      return {};
    };
    await runWithRequestContext({ requestId: 'req-logged' }, () =>
      client.getSubscription({ tenantId: 'ten_1' }),
    );
    expect(logLines.find((l) => l.msg === 'inside handler')).toMatchObject({ reqId: 'req-logged' });
  });
});

describe.each(TRANSPORTS)('rpc: health and shutdown over $name', (transport) => {
  const logger = createLogger({ level: 'silent', service: 'rpc-test' });

  async function serve(impl: ServiceImpl<Billing>) {
    const server = new RpcServer(logger);
    server.add(BillingService, impl);
    await listenOn(server, transport);
    return server;
  }

  it('Check reports SERVING, per-service status set on the server, and not_found for unknown services', async () => {
    const server = await serve(fakeBilling({ getSubscription: async () => ({}) }));
    const health = connect(HealthService, targetOf(server));
    try {
      expect((await health.check({ service: '' })).status).toBe(ServingStatus.SERVING);
      server.health.set(BillingService.typeName, ServingStatus.NOT_SERVING);
      expect((await health.check({ service: BillingService.typeName })).status).toBe(
        ServingStatus.NOT_SERVING,
      );
      await expect(health.check({ service: 'nope' })).rejects.toMatchObject({ code: 'not_found' });
    } finally {
      health.close();
      await server.close(1_000);
    }
  });

  it('Watch streams the current status, then NOT_SERVING once the server shuts down', async () => {
    const server = await serve(fakeBilling({ getSubscription: async () => ({}) }));
    const health = connect(HealthService, targetOf(server), { timeoutMs: 10_000 });
    const abort = new AbortController();
    try {
      const stream = health.watch({ service: '' }, { signal: abort.signal })[Symbol.asyncIterator]();
      const first = await within('the first status', stream.next());
      expect(first.value?.status).toBe(ServingStatus.SERVING);
      const closing = server.close(5_000);
      const second = await within('the shutdown status', stream.next());
      expect(second.value?.status).toBe(ServingStatus.NOT_SERVING);
      abort.abort();
      await closing;
    } finally {
      abort.abort();
      health.close();
    }
  });

  it('close() does not wait out its grace period for a client that keeps watching health', async () => {
    const server = await serve(fakeBilling({ getSubscription: async () => ({}) }));
    const health = connect(HealthService, targetOf(server), { timeoutMs: 30_000 });
    try {
      const stream = health.watch({ service: '' })[Symbol.asyncIterator]();
      expect((await within('the first status', stream.next())).value?.status).toBe(ServingStatus.SERVING);
      // Waiting out the grace period would take 20 s; how long less depends on the machine.
      const started = performance.now();
      await server.close(20_000);
      expect(performance.now() - started).toBeLessThan(10_000);
      const statuses: ServingStatus[] = [];
      for (;;) {
        const next = await within('the stream to end', stream.next());
        if (next.done) break;
        statuses.push(next.value.status);
      }
      expect(statuses).toEqual([ServingStatus.NOT_SERVING]);
    } finally {
      health.close();
    }
  });

  it('Watch streams status changes of one service as they happen', async () => {
    const server = await serve(fakeBilling({ getSubscription: async () => ({}) }));
    const health = connect(HealthService, targetOf(server), { timeoutMs: 10_000 });
    const abort = new AbortController();
    try {
      const service = BillingService.typeName;
      const stream = health.watch({ service }, { signal: abort.signal })[Symbol.asyncIterator]();
      expect((await within('unknown', stream.next())).value?.status).toBe(ServingStatus.SERVICE_UNKNOWN);
      server.health.set(service, ServingStatus.SERVING);
      expect((await within('serving', stream.next())).value?.status).toBe(ServingStatus.SERVING);
      server.health.set(service, ServingStatus.NOT_SERVING);
      expect((await within('not serving', stream.next())).value?.status).toBe(ServingStatus.NOT_SERVING);
    } finally {
      abort.abort();
      health.close();
      await server.close(1_000);
    }
  });

  it('close() lets an in-flight call finish, and resolves once it has', async () => {
    let entered = false;
    let release: () => void = () => {};
    const server = await serve(
      fakeBilling({
        getSubscription: async (req) => {
          entered = true;
          await new Promise<void>((resolve) => {
            release = resolve;
          });
          return { subscription: { tenantId: req.tenantId, planId: 'pro' } };
        },
      }),
    );
    const client = connect(BillingService, targetOf(server));
    try {
      const inFlight = client.getSubscription({ tenantId: 'ten_inflight' });
      await waitFor('the handler to start', () => entered);
      let closed = false;
      const closing = server.close(10_000).then(() => {
        closed = true;
      });
      await new Promise((resolve) => setImmediate(resolve));
      expect(closed).toBe(false);
      release();
      const res = await within('the in-flight call', inFlight);
      expect(res.subscription).toMatchObject({ tenantId: 'ten_inflight', planId: 'pro' });
      await within('close', closing, 5_000);
    } finally {
      client.close();
    }
  });

  it('close() gives up waiting after its grace period', async () => {
    let entered = false;
    const server = await serve(
      fakeBilling({
        getSubscription: () => {
          entered = true;
          return new Promise(() => {});
        },
      }),
    );
    const client = connect(BillingService, targetOf(server), { timeoutMs: 10_000 });
    try {
      const stuck = client.getSubscription({ tenantId: 'ten_stuck' }).catch((e: unknown) => e);
      await waitFor('the handler to start', () => entered);
      // Not giving up, close() would wait for the call's own 10 s deadline.
      const started = performance.now();
      await server.close(300);
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(await within('the stuck call to fail', stuck)).toMatchObject({ code: 'unavailable' });
    } finally {
      client.close();
    }
  });
});

/** A TCP forwarder to a local port, counting the connections made through it. */
interface Forwarder {
  readonly port: number;
  readonly connections: number;
  close(): Promise<void>;
}

async function forward(to: number): Promise<Forwarder> {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((client) => {
    connections++;
    const upstream = dial(to, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('the forwarder did not bind');
  return {
    port: address.port,
    get connections() {
      return connections;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('rpc: several replicas behind one target', () => {
  const logger = createLogger({ level: 'silent', service: 'rpc-test' });

  async function replicas(n: number, handler: (replica: number) => GetSubscription, maxConnectionAgeMs = 0) {
    const servers: RpcServer[] = [];
    for (let i = 0; i < n; i++) {
      const server = new RpcServer(logger, { maxConnectionAgeMs });
      server.add(BillingService, fakeBilling({ getSubscription: handler(i) }));
      await server.listen('127.0.0.1:0');
      servers.push(server);
    }
    const target = `ipv4:${servers.map((s) => `127.0.0.1:${s.port}`).join(',')}`;
    return { servers, target };
  }

  it('unary calls go round-robin over every replica, and none fails while replicas recycle connections at their max connection age', async () => {
    /** Calls each replica served once its client had connected to it a fourth time (three recycles). */
    const afterRecycles = [0, 0, 0];
    const fronts: Forwarder[] = [];
    const { servers } = await replicas(
      3,
      (i) => async (req) => {
        if ((fronts[i]?.connections ?? 0) >= 4) afterRecycles[i] = (afterRecycles[i] ?? 0) + 1;
        return { subscription: { tenantId: req.tenantId, planId: 'free' } };
      },
      1_000,
    );
    // Each replica behind a forwarder that counts the connections made to it: the run lasts
    // until every replica has closed its connection three times (GOAWAY at ~1 s) and served
    // calls on the next one, however slowly a loaded machine gets there.
    for (const s of servers) fronts.push(await forward(s.port));
    const target = `ipv4:${fronts.map((f) => `127.0.0.1:${f.port}`).join(',')}`;
    // A deadline far beyond a stall: a call that fails here fails for another reason than the machine's speed.
    const client = connect(BillingService, target, { timeoutMs: 10_000 });
    const failures: string[] = [];
    let running = true;
    try {
      const load = Array.from({ length: 32 }, async () => {
        while (running) {
          try {
            await client.getSubscription({ tenantId: 'ten_1' });
          } catch (err) {
            failures.push((err as Error).message);
          }
        }
      });
      try {
        await waitFor(
          'calls after three recycles of every replica',
          // More than the 32 calls in flight: some were sent after the fourth connection was made.
          () => afterRecycles.every((n) => n > 32),
          30_000,
        );
      } finally {
        running = false;
        await Promise.all(load);
      }
    } finally {
      client.close();
      await Promise.all(servers.map((s) => s.close(0)));
      await Promise.all(fronts.map((f) => f.close()));
    }
    expect(failures).toEqual([]);
  }, 60_000);

  it('a call answered unavailable is tried once more on another replica; other errors are not retried', async () => {
    const calls = [0, 0];
    const { servers, target } = await replicas(2, (i) => async (req) => {
      calls[i] = (calls[i] ?? 0) + 1;
      if (req.tenantId === 'ten_gone' && i === 0) throw new AppError('unavailable', 'replica 0 is draining');
      if (req.tenantId === 'ten_bad') throw new AppError('invalid_request', 'bad tenant');
      return { subscription: { tenantId: req.tenantId, planId: `from-${i}` } };
    });
    const client = connect(BillingService, target, { timeoutMs: 10_000 });
    try {
      // Until both replicas are connected, round-robin has only one to choose from.
      for (let n = 0; !((calls[0] ?? 0) > 0 && (calls[1] ?? 0) > 0); n++) {
        if (n > 200) throw new Error('round-robin never reached both replicas');
        await client.getSubscription({ tenantId: 'ten_warm' });
        await new Promise((r) => setTimeout(r, 10));
      }
      calls.fill(0);
      // Whichever replica comes first, the answer is replica 1's.
      for (let n = 0; n < 4; n++) {
        const res = await client.getSubscription({ tenantId: 'ten_gone' });
        expect(res.subscription?.planId).toBe('from-1');
      }
      expect((calls[0] ?? 0) + (calls[1] ?? 0)).toBeGreaterThan(4);
      calls.fill(0);
      await expect(client.getSubscription({ tenantId: 'ten_bad' })).rejects.toMatchObject({
        code: 'invalid_request',
      });
      expect((calls[0] ?? 0) + (calls[1] ?? 0)).toBe(1);
    } finally {
      client.close();
      await Promise.all(servers.map((s) => s.close(0)));
    }
  });
});
