import { randomBytes } from 'node:crypto';
import { createRedis } from '@relayplane/shared/redis';
import { BullmqScheduler, MemoryScheduler, type Scheduler } from '@relayplane/shared/scheduler';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { createTestRedis } from '../../src/storage.ts';
import { INTERVAL_MS, RunLog, schedulerConformance } from './conformance/scheduler.ts';
import { waitFor } from './conformance/wait.ts';

const logger = testLogger('scheduler');

schedulerConformance('MemoryScheduler', { create: () => new MemoryScheduler(logger) });

const testRedis = createTestRedis('scheduler');
// bullmq writes `<prefix>:<queue>:…`; the test prefix keeps every key of this file together.
const prefix = testRedis.prefix.replace(/:$/, '');
const connections: Redis[] = [];

function bullmq(group = randomBytes(4).toString('hex')): Scheduler {
  const connection = createRedis({ url: testRedis.url, prefix: testRedis.prefix }, logger, `sched-${group}`);
  connections.push(connection);
  return new BullmqScheduler(`maintenance-${group}`, connection, prefix, logger);
}

async function quitConnections(): Promise<void> {
  await Promise.all(connections.splice(0).map((c) => c.quit().catch(() => {})));
}

schedulerConformance('BullmqScheduler (real Redis)', { create: bullmq, cleanup: quitConnections });

describe('BullmqScheduler replicas (real Redis)', () => {
  const open: Scheduler[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
    await quitConnections();
  });

  it('two replicas with the same queue run one schedule: about one run per interval, not two', async () => {
    const group = randomBytes(4).toString('hex');
    const a = bullmq(group);
    const b = bullmq(group);
    open.push(a, b);
    const runs = new RunLog();
    a.every('sweep', INTERVAL_MS, runs.handler);
    b.every('sweep', INTERVAL_MS, runs.handler);
    // One schedule runs each of its slots once, and its first slot is no earlier than its
    // start: the runs that start within `intervals` intervals of it are at most intervals + 1,
    // however late a loaded machine starts some of them (a late run is never followed by a
    // catch-up burst: missed slots are skipped). Two schedules would make about twice as many.
    const intervals = 15;
    const from = Date.now();
    await a.start();
    await b.start();
    const until = from + intervals * INTERVAL_MS;
    await runs.atLeast(8);
    await waitFor('the end of the span', () => Date.now() > until, 10_000);
    expect(runs.starts.filter((t) => t <= until).length).toBeLessThanOrEqual(intervals + 1);
  });

  it('trigger before start fails instead of silently dropping the run', async () => {
    const s = bullmq();
    open.push(s);
    s.every('job', INTERVAL_MS, async () => {});
    await expect(s.trigger('job')).rejects.toThrow(/not started/);
  });
});

describe('BullmqScheduler after Redis lost its data (real Redis)', () => {
  const open: Scheduler[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
    await quitConnections();
  });

  it('writes a lost schedule again, so the job keeps running without a restart', async () => {
    const group = randomBytes(4).toString('hex');
    const connection = createRedis(
      { url: testRedis.url, prefix: testRedis.prefix },
      logger,
      `sched-${group}`,
    );
    connections.push(connection);
    const scheduler = new BullmqScheduler(`maintenance-${group}`, connection, prefix, logger, {
      scheduleCheckMs: 100,
    });
    open.push(scheduler);
    const runs = new RunLog();
    scheduler.every('sweep', INTERVAL_MS, runs.handler);
    await scheduler.start();
    await runs.atLeast(2);
    // What a flush does to this queue: every key of it is gone.
    const keys = await connection.keys(`${prefix}:maintenance-${group}:*`);
    expect(keys.length).toBeGreaterThan(0);
    await connection.del(...keys);
    expect(await connection.keys(`${prefix}:maintenance-${group}:*`)).toEqual([]);
    const before = runs.count;
    await runs.atLeast(before + 3);
    expect(await connection.exists(`${prefix}:maintenance-${group}:repeat`)).toBe(1);
  });
});

describe('BullmqScheduler connections (real Redis)', () => {
  it('close releases every Redis connection the scheduler opened', async () => {
    const group = randomBytes(4).toString('hex');
    const name = `relayplane-sched-${group}`;
    const admin = createRedis({ url: testRedis.url, prefix: testRedis.prefix }, logger, 'admin');
    try {
      const count = async () =>
        String(await admin.client('LIST'))
          .split('\n')
          .filter((line: string) => line.includes(`name=${name}`)).length;
      const s = bullmq(group);
      const log = new RunLog();
      s.every('job', INTERVAL_MS, log.handler);
      await s.start();
      await log.atLeast(1);
      expect(await count()).toBeGreaterThan(0);
      await s.close();
      await quitConnections();
      // Disconnects are asynchronous on the server side; poll for a bounded time.
      const deadline = Date.now() + 5_000;
      let open = await count();
      while (open > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        open = await count();
      }
      expect(open).toBe(0);
    } finally {
      await admin.quit();
    }
  });
});

afterAll(() => testRedis.clean());
