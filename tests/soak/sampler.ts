/**
 * Takes the soak's samples: every started app through /proc and its metrics listener, the
 * gateways' answer counters, PostgreSQL's backends on the soak's database and Redis. CPU
 * figures cover the interval since the previous sample, so the first sample has none.
 */
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { machineCpu } from '../support/machine.ts';
import { type CpuReading, cpuBetween, readCpu } from './calibrate.ts';
import {
  cpuSeconds,
  postgresConnections,
  processSample,
  redisSample,
  scrape,
  settledRssBytes,
} from './probes.ts';
import type { Sample, StreamWindow } from './sample.ts';
import type { RouteAnswers } from './verdict.ts';

/** A started app as the soak samples it. */
export interface Target {
  name: string;
  pid: number;
  metricsUrl: string;
}

export interface SamplerOptions {
  targets: Target[];
  /** A client connected to another database of the server than `database`. */
  postgres: pg.Client;
  database: string;
  redis: Redis;
  prefix: string;
}

/** The gateways' answer counters, summed over the gateways, by method, route and status. */
export async function gatewayAnswers(targets: Target[]): Promise<RouteAnswers[]> {
  const byKey = new Map<string, RouteAnswers>();
  for (const g of targets.filter((t) => t.name.startsWith('gateway'))) {
    for (const s of (await scrape(g.metricsUrl)).get('relayplane_http_requests_total') ?? []) {
      const { method = '', route = '', status = '' } = s.labels;
      const key = `${method} ${route} ${status}`;
      const entry = byKey.get(key) ?? { method, route, status, count: 0 };
      entry.count += s.value;
      byKey.set(key, entry);
    }
  }
  return [...byKey.values()].sort((a, b) =>
    `${a.route} ${a.method} ${a.status}`.localeCompare(`${b.route} ${b.method} ${b.status}`),
  );
}

/** A function that takes the next sample, `elapsedSeconds` counted from its creation. */
export function createSampler(
  o: SamplerOptions,
): (streams?: Record<string, StreamWindow>) => Promise<Sample> {
  const started = performance.now();
  let previous:
    | {
        at: number;
        machine: ReturnType<typeof machineCpu>;
        self: NodeJS.CpuUsage;
        apps: number[];
        reading: CpuReading;
      }
    | undefined;
  const pids = o.targets.map((t) => t.pid);
  return async (streams) => {
    const reading = await readCpu({ pids, postgres: o.postgres, database: o.database, redis: o.redis });
    const at = performance.now();
    const machine = machineCpu();
    const self = process.cpuUsage();
    const apps = o.targets.map((t) => cpuSeconds(t.pid));
    const seconds = previous ? (at - previous.at) / 1000 : 0;
    const perSecond = (used: number) => +(used / seconds).toFixed(3);
    const rss = await settledRssBytes(pids);
    const processes = await Promise.all(
      o.targets.map(async (t, i) =>
        processSample(
          t.name,
          rss[i] ?? 0,
          await scrape(t.metricsUrl),
          previous ? perSecond((apps[i] ?? 0) - (previous.apps[i] ?? 0)) : undefined,
        ),
      ),
    );
    const answersByStatus: Record<string, number> = {};
    for (const a of await gatewayAnswers(o.targets)) {
      answersByStatus[a.status] = (answersByStatus[a.status] ?? 0) + a.count;
    }
    const sample: Sample = {
      at: new Date().toISOString(),
      elapsedSeconds: +((at - started) / 1000).toFixed(1),
      processes,
      postgres: await postgresConnections(o.postgres, o.database),
      redis: await redisSample(o.redis, o.prefix),
      answersByStatus,
      ...(previous
        ? {
            cpu: {
              machineBusy: +(
                (machine.busy - previous.machine.busy) /
                Math.max(1, machine.total - previous.machine.total)
              ).toFixed(3),
              loadGeneratorCores: perSecond(
                (self.user + self.system - previous.self.user - previous.self.system) / 1e6,
              ),
              dependencyCores: cpuBetween(previous.reading, reading).dependencyCores,
            },
          }
        : {}),
      ...(streams ? { streams } : {}),
    };
    previous = { at, machine, self, apps, reading };
    return sample;
  };
}
