/** Serving: how a gRPC service starts before its dependencies (listen first, steps retried, then ready). */
import { create } from '@bufbuild/protobuf';
import { AppError } from '@relayplane/contract/errors';
import { BillingService } from '@relayplane/proto/billing';
import { HealthCheckRequestSchema } from '@relayplane/proto/grpc-health';
import { ConfigError } from '@relayplane/shared/config';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { createRegistry } from '@relayplane/shared/metrics';
import { connect, RpcServer, type ServiceImpl } from '@relayplane/shared/rpc';
import { Serving } from '@relayplane/shared/serving';
import { afterEach, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { within } from './conformance/wait.ts';

const logger = testLogger('serving');

/** Every billing RPC answers an empty message: what matters here is whether it runs at all. */
const billingImpl = Object.fromEntries(
  BillingService.methods.map((m) => [m.localName, async () => ({})]),
) as unknown as ServiceImpl<typeof BillingService>;

describe('Serving: start before the dependencies', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  function start(database = { up: true }) {
    const rpc = new RpcServer(logger);
    const serving = new Serving({
      rpc,
      serviceName: BillingService.typeName,
      database: { ping: async () => database.up },
      listen: '127.0.0.1:0',
      metrics: createRegistry(),
      metricsAddress: undefined,
      logger,
      name: 'billing',
    });
    rpc.add(BillingService, serving.guard(BillingService, billingImpl));
    cleanup.push(async () => {
      serving.stop();
      await rpc.close(1_000);
    });
    return { rpc, serving };
  }

  function clients(port: number) {
    const health = connect(HealthService, `127.0.0.1:${port}`);
    const billing = connect(BillingService, `127.0.0.1:${port}`, { retries: false });
    cleanup.push(() => {
      health.close();
      billing.close();
    });
    return { health, billing };
  }

  it("listens before start-up is done: alive ('' SERVING), not ready, every call answered unavailable with a retry hint; then ready", async () => {
    const { serving } = start();
    await serving.listen();
    const { health, billing } = clients(serving.port);
    expect((await health.check({ service: '' })).status).toBe(ServingStatus.SERVING);
    expect((await health.check({ service: BillingService.typeName })).status).toBe(ServingStatus.NOT_SERVING);
    const refused = await billing.listPlans({}).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ code: 'unavailable', retryAfterSeconds: 1 });

    await serving.ready();
    expect((await health.check({ service: BillingService.typeName })).status).toBe(ServingStatus.SERVING);
    expect(await billing.listPlans({})).toMatchObject({ plans: [] });
  });

  it('once ready, readiness follows the database while liveness stays SERVING', async () => {
    const database = { up: true };
    const { serving } = start(database);
    await serving.listen();
    await serving.ready();
    const { health } = clients(serving.port);
    database.up = false;
    // The database is checked every second; the deadline leaves a loaded machine room for late checks.
    const deadline = Date.now() + 15_000;
    while ((await health.check({ service: BillingService.typeName })).status !== ServingStatus.NOT_SERVING) {
      if (Date.now() > deadline) throw new Error('still SERVING 15 s after the database went away');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await health.check({ service: '' })).status).toBe(ServingStatus.SERVING);
  });

  it('retries a start-up step until it succeeds', async () => {
    const { serving } = start();
    let attempts = 0;
    const result = await serving.step('migrations', async () => {
      attempts++;
      if (attempts < 3)
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      return 'applied';
    });
    expect(result).toBe('applied');
    expect(attempts).toBe(3);
  });

  it('ends start-up at once on a configuration error', async () => {
    const { serving } = start();
    let attempts = 0;
    const bad = new ConfigError('RELAYPLANE_KEK', 'does not match');
    await expect(
      serving.step('signing keys', async () => {
        attempts++;
        throw bad;
      }),
    ).rejects.toBe(bad);
    expect(attempts).toBe(1);
  });

  it('stop() abandons a step still waiting for its dependency, promptly', async () => {
    const { serving } = start();
    let attempts = 0;
    let secondAttempt: () => void = () => {};
    const backedOff = new Promise<void>((resolve) => {
      secondAttempt = resolve;
    });
    const waiting = serving.step('migrations', async () => {
      if (++attempts === 2) secondAttempt();
      throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
    });
    const outcome = waiting.catch((err: Error) => err.message);
    await within('a second attempt', backedOff);
    serving.stop();
    expect(await within('the abandoned step', outcome, 5_000)).toBe('billing is stopping');
    expect(attempts).toBe(2);
    await expect(serving.ready()).rejects.toThrow('billing is stopping');
  });

  it('guards server-streaming methods too: the stream fails unavailable until ready', async () => {
    const { serving } = start();
    const guarded = serving.guard(HealthService, {
      check: async () => ({ status: ServingStatus.SERVING }),
      async *watch() {
        yield { status: ServingStatus.SERVING };
      },
    });
    const call = { method: 'Watch', metadata: undefined as never, signal: new AbortController().signal };
    const request = create(HealthCheckRequestSchema, { service: '' });
    const first = guarded.watch(request, call)[Symbol.asyncIterator]().next();
    await expect(first).rejects.toMatchObject({ code: 'unavailable' });
    await serving.ready();
    const next = await guarded.watch(request, call)[Symbol.asyncIterator]().next();
    expect(next.value).toEqual({ status: ServingStatus.SERVING });
  });
});
