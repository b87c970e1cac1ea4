/**
 * A service starts while Redis is away: its bus subscriptions and its job schedules are made
 * when Redis answers, and neither start() nor close() waits for it. Redis "returns" by a port
 * that refuses connections until the test opens it, forwarding to the test Redis.
 */
import { randomBytes } from 'node:crypto';
import { createServer, connect as dial, type Server, type Socket } from 'node:net';
import { RedisBus } from '@relayplane/shared/bus';
import { createRedis, deferringSubscriptions } from '@relayplane/shared/redis';
import { BullmqScheduler } from '@relayplane/shared/scheduler';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { createTestRedis } from '../../src/storage.ts';
import { RunLog } from './conformance/scheduler.ts';
import { waitFor, within } from './conformance/wait.ts';

const logger = testLogger('redis-away');
const testRedis = createTestRedis('redisaway');
const target = new URL(testRedis.url);

/**
 * A port on which nothing listens until open(), then a forwarder to the test Redis. Taken below
 * the kernel's ephemeral range: a client reconnecting to an ephemeral port nobody listens on
 * can connect to itself (TCP simultaneous open).
 */
class LatePort {
  readonly port: number;
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;

  private constructor(port: number) {
    this.port = port;
  }

  static async reserve(): Promise<LatePort> {
    for (let attempt = 0; attempt < 100; attempt++) {
      const port = 20_000 + Math.floor(Math.random() * 8_000);
      const probe = createServer();
      const free = await new Promise<boolean>((resolve) => {
        probe.once('error', () => resolve(false));
        probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
      });
      if (free) return new LatePort(port);
    }
    throw new Error('no free port below the ephemeral range');
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = dial(Number(target.port || 6379), target.hostname);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.#server = server;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    const server = this.#server;
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}

describe('starting while Redis is away', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  async function latePort(): Promise<LatePort> {
    const port = await LatePort.reserve();
    cleanup.push(() => port.close());
    return port;
  }

  function connection(url: string, name: string): Redis {
    const redis = createRedis({ url, prefix: testRedis.prefix }, logger, name);
    cleanup.push(() => redis.disconnect());
    return redis;
  }

  it('bus: subscribe() resolves while Redis is away, and the subscription goes live once Redis answers', async () => {
    const port = await latePort();
    const main = connection(port.url, 'away-main');
    const sub = connection(port.url, 'away-sub');
    const bus = deferringSubscriptions(new RedisBus(main, sub, testRedis.prefix), [main, sub], logger);
    cleanup.push(() => bus.close());
    const received: string[] = [];
    const unsubscribe = await within(
      'subscribe() while Redis is away',
      bus.subscribe('keys', (m) => received.push(m)),
      3_000,
    );

    await port.open();
    const publisher = new Redis(testRedis.url);
    cleanup.push(() => publisher.disconnect());
    const channel = `${testRedis.prefix}keys`;
    // Published until heard: delivery starts when the background SUBSCRIBE lands, after the
    // next reconnection attempt (up to 2 s of backoff), later still on a loaded machine.
    await waitFor(
      'a message through the late subscription',
      () => {
        void publisher.publish(channel, 'changed');
        return received.length > 0;
      },
      15_000,
    );
    expect(received[0]).toBe('changed');

    await unsubscribe();
    const [, count] = (await publisher.pubsub('NUMSUB', channel)) as [string, number];
    expect(Number(count)).toBe(0);
  });

  it('bus: while Redis answers, a subscription is live when subscribe() resolves', async () => {
    const main = connection(testRedis.url, 'up-main');
    const sub = connection(testRedis.url, 'up-sub');
    const bus = deferringSubscriptions(new RedisBus(main, sub, testRedis.prefix), [main, sub], logger);
    cleanup.push(() => bus.close());
    await bus.subscribe('relays', () => {});
    const publisher = new Redis(testRedis.url);
    cleanup.push(() => publisher.disconnect());
    const [, count] = (await publisher.pubsub('NUMSUB', `${testRedis.prefix}relays`)) as [string, number];
    expect(Number(count)).toBe(1);
  });

  it('scheduler: start() and close() do not wait for Redis; the jobs run once it answers', async () => {
    const port = await latePort();
    const redis = connection(port.url, 'away-sched');
    const scheduler = new BullmqScheduler(
      `away-${randomBytes(4).toString('hex')}`,
      redis,
      testRedis.prefix.replace(/:$/, ''),
      logger,
    );
    const log = new RunLog();
    scheduler.every('tick', 200, log.handler);
    await within('start() while Redis is away', scheduler.start(), 1_000);
    await port.open();
    await log.atLeast(1, 20_000);
    await within('close()', scheduler.close(), 10_000);
  });

  it('scheduler: close() while Redis is still away returns promptly', async () => {
    const port = await latePort();
    const redis = connection(port.url, 'away-sched-close');
    const scheduler = new BullmqScheduler('away-close', redis, testRedis.prefix.replace(/:$/, ''), logger);
    scheduler.every('tick', 200, async () => {});
    await scheduler.start();
    // Let the worker and the schedule writer reach their wait for Redis.
    await waitFor('a failed connection attempt', () => redis.status === 'reconnecting', 3_000);
    // Waiting for Redis, close() would never return; how fast it returns depends on the machine.
    await within('close() while Redis is away', scheduler.close(), 10_000);
  });
});

afterAll(() => testRedis.clean());
