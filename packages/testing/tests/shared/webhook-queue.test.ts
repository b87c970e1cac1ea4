import { randomBytes } from 'node:crypto';
import { createRedis } from '@relayplane/shared/redis';
import {
  BullmqDeliveryQueue,
  type DeliveryQueue,
  MemoryDeliveryQueue,
  type ReadyDelivery,
} from '@relayplane/shared/webhook-queue';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { createTestRedis } from '../../src/storage.ts';
import { waitFor } from './conformance/wait.ts';

const logger = testLogger('webhook-queue');
const testRedis = createTestRedis('webhook_queue');
const connections: Redis[] = [];
const open: DeliveryQueue[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((q) => q.close()));
  await Promise.all(connections.splice(0).map((c) => c.quit().catch(() => {})));
});

const delivery = (i: number, attempts = 0): ReadyDelivery => ({
  id: `dlv_${i}`,
  endpointId: 'whk_a',
  attempts,
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A handler that records each run and how many ran at once. */
function recorder(holdMs: number) {
  const runs: string[] = [];
  let now = 0;
  let peak = 0;
  const handler = async (d: ReadyDelivery) => {
    now++;
    peak = Math.max(peak, now);
    await sleep(holdMs);
    runs.push(`${d.id}.${d.attempts}`);
    now--;
  };
  return { runs, handler, peak: () => peak };
}

function queues(): [string, (group: string, concurrency: number) => DeliveryQueue][] {
  return [
    ['MemoryDeliveryQueue', (_group, concurrency) => new MemoryDeliveryQueue(concurrency, logger)],
    [
      'BullmqDeliveryQueue (real Redis)',
      (group, concurrency) => {
        const connection = createRedis(
          { url: testRedis.url, prefix: testRedis.prefix },
          logger,
          `hooks-${group}`,
        );
        connections.push(connection);
        return new BullmqDeliveryQueue(connection, `${testRedis.prefix}${group}`, concurrency, logger);
      },
    ],
  ];
}

for (const [name, create] of queues()) {
  describe(name, () => {
    it('runs every delivery once, at most `concurrency` at a time', async () => {
      const q = create(randomBytes(4).toString('hex'), 3);
      open.push(q);
      const r = recorder(40);
      q.start(r.handler);
      await q.add(Array.from({ length: 12 }, (_, i) => delivery(i)));
      await waitFor('r.runs.length === 12', () => r.runs.length === 12, 10_000);
      expect(new Set(r.runs).size).toBe(12);
      expect(r.peak()).toBeLessThanOrEqual(3);
      expect(r.peak()).toBeGreaterThanOrEqual(2);
    });

    it('takes the same attempt of a delivery once while it waits; the next attempt is another job', async () => {
      const q = create(randomBytes(4).toString('hex'), 1);
      open.push(q);
      const r = recorder(100);
      await q.add([delivery(1), delivery(1), delivery(2)]);
      await q.add([delivery(1)]);
      q.start(r.handler);
      await waitFor('r.runs.length === 2', () => r.runs.length === 2, 10_000);
      await q.add([delivery(1, 1)]);
      await waitFor('r.runs.length === 3', () => r.runs.length === 3, 10_000);
      await sleep(300);
      expect(r.runs.sort()).toEqual(['dlv_1.0', 'dlv_1.1', 'dlv_2.0']);
    });

    it('close() waits for the attempts in flight', async () => {
      const q = create(randomBytes(4).toString('hex'), 2);
      const r = recorder(300);
      q.start(r.handler);
      await q.add([delivery(1), delivery(2)]);
      await waitFor('r.peak() === 2', () => r.peak() === 2, 10_000);
      await q.close();
      expect(r.runs.sort()).toEqual(['dlv_1.0', 'dlv_2.0']);
    });
  });
}

describe('BullmqDeliveryQueue replicas (real Redis)', () => {
  it('two replicas on one queue send each delivery once between them, and both take work', async () => {
    const group = randomBytes(4).toString('hex');
    const [, create] = queues()[1] as [string, (group: string, concurrency: number) => DeliveryQueue];
    const a = create(group, 2);
    const b = create(group, 2);
    open.push(a, b);
    const ra = recorder(30);
    const rb = recorder(30);
    a.start(ra.handler);
    b.start(rb.handler);
    await a.add(Array.from({ length: 20 }, (_, i) => delivery(i)));
    await waitFor(
      'ra.runs.length + rb.runs.length === 20',
      () => ra.runs.length + rb.runs.length === 20,
      10_000,
    );
    await sleep(200);
    const all = [...ra.runs, ...rb.runs];
    expect(all).toHaveLength(20);
    expect(new Set(all).size).toBe(20);
    expect(ra.runs.length).toBeGreaterThan(0);
    expect(rb.runs.length).toBeGreaterThan(0);
  });
});

describe('BullmqDeliveryQueue with Redis away', () => {
  it('closes at once instead of waiting for a Redis that does not answer', async () => {
    const connection = createRedis({ url: 'redis://127.0.0.1:1', prefix: 'away:' }, logger, 'hooks-away');
    connections.push(connection);
    const q = new BullmqDeliveryQueue(connection, 'away:', 2, logger);
    q.start(async () => {});
    const started = Date.now();
    await q.close();
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});
