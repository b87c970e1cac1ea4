/**
 * Conformance suite for the `Scheduler` port. Every implementation runs it with a short
 * interval and waits for runs with bounded deadlines.
 */

import type { Scheduler } from '@relayplane/shared/scheduler';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor, within } from './wait.ts';

export interface SchedulerFactory {
  /** A new scheduler with its own queue; schedulers created with the same `group` are replicas of one another. */
  create(group?: string): Scheduler;
  cleanup?(): Promise<void>;
}

export const INTERVAL_MS = 200;

/** Counts runs of a job and remembers when each started. */
export class RunLog {
  readonly starts: number[] = [];
  get count(): number {
    return this.starts.length;
  }
  readonly handler = async () => {
    this.starts.push(Date.now());
  };
  atLeast(n: number, timeoutMs = 10_000): Promise<void> {
    return waitFor(`${n} runs (saw ${this.count})`, () => this.count >= n, timeoutMs);
  }
}

/** The absence of runs can only be observed over a window. */
function quietWindow(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function schedulerConformance(name: string, factory: SchedulerFactory): void {
  describe(`Scheduler conformance: ${name}`, () => {
    const open: Scheduler[] = [];
    const create = (group?: string) => {
      const s = factory.create(group);
      open.push(s);
      return s;
    };

    afterEach(async () => {
      await Promise.all(open.splice(0).map((s) => s.close()));
      await factory.cleanup?.();
    });

    it('runs a registered job repeatedly, about once per interval', async () => {
      const scheduler = create();
      const log = new RunLog();
      scheduler.every('tick', INTERVAL_MS, log.handler);
      const from = Date.now();
      await scheduler.start();
      // Keeps running…
      await log.atLeast(4);
      // …and not faster than the interval: the runs started within n intervals of the start are
      // at most n + 1, however late a loaded machine starts any single run. (bullmq's schedules
      // are fixed-rate: a run that starts 150 ms late is followed by an on-time one 50 ms later,
      // so gaps between runs say nothing; a slot run twice, or a second schedule, makes ~2n.)
      const n = 8;
      const end = from + n * INTERVAL_MS;
      await waitFor(`${n} intervals to pass`, () => Date.now() > end, n * INTERVAL_MS + 1_000);
      expect(log.starts.filter((t) => t <= end).length).toBeLessThanOrEqual(n + 1);
    });

    it('runs only the job that is due: each registered job on its own interval', async () => {
      const scheduler = create();
      const fast = new RunLog();
      const slow = new RunLog();
      scheduler.every('fast', INTERVAL_MS, fast.handler);
      scheduler.every('slow', 60_000, slow.handler);
      await scheduler.start();
      await fast.atLeast(3);
      expect(slow.count).toBeLessThanOrEqual(1);
    });

    it('trigger runs a job out of schedule', async () => {
      const scheduler = create();
      const log = new RunLog();
      scheduler.every('rare', 3_600_000, log.handler);
      await scheduler.start();
      const before = log.count;
      await scheduler.trigger('rare');
      await waitFor('the triggered run', () => log.count > before, 5_000);
    });

    it('trigger rejects a job name that was never registered', async () => {
      const scheduler = create();
      scheduler.every('known', 3_600_000, async () => {});
      await scheduler.start();
      await expect(scheduler.trigger('unknown')).rejects.toThrow(/unknown job unknown/);
    });

    it('keeps running a job after one of its runs failed', async () => {
      const scheduler = create();
      const log = new RunLog();
      scheduler.every('flaky', INTERVAL_MS, async () => {
        await log.handler();
        if (log.count === 1) throw new Error('first run fails');
      });
      await scheduler.start();
      await log.atLeast(3);
    });

    it('close waits for a running job to finish, and the job never runs afterwards', async () => {
      const scheduler = create();
      let release: () => void = () => {};
      let finished = false;
      const log = new RunLog();
      scheduler.every('slow-job', INTERVAL_MS, async () => {
        await log.handler();
        if (log.count === 1) {
          await new Promise<void>((resolve) => {
            release = resolve;
          });
          finished = true;
        }
      });
      await scheduler.start();
      await log.atLeast(1);
      const closing = scheduler.close();
      let closed = false;
      void closing.then(() => {
        closed = true;
      });
      await Promise.resolve();
      expect(closed).toBe(false);
      release();
      await within('close', closing, 10_000);
      expect(finished).toBe(true);
      const runs = log.count;
      await quietWindow(INTERVAL_MS * 4);
      expect(log.count).toBe(runs);
    });
  });
}
