/**
 * The soak's load, calibrated to half the machine.
 *
 * The paced streams start from shares of each stream's closed-loop capacity (mix.ts: 30 %
 * issuance, 10 % assignment, 5 % JWKS), but the shares do not add up to the machine's load: a
 * stream at 30 % of its closed-loop rate does not use 30 % of the machine (the closed loop
 * queues work the open loop does not, and the processes, PostgreSQL and Redis do not scale
 * alike), and the first 10-minute run at those shares — 45 % on paper — kept the machine 98 %
 * busy. So, with the scripted flows running, the streams are paced for a short window at a few
 * fractions of those rates (CALIBRATION_SCALES, 0 being the flows alone), the CPU the soak
 * causes is measured in the latter part of each, and the least-squares line through them (the
 * flows' fixed cost + a cost proportional to the streams' rates) gives the fraction at which
 * the soak uses TARGET_SHARE of the machine's cores. The rates are then fixed for the whole run; the calibration is printed and kept in
 * the results.
 *
 * "The CPU the soak causes" is counted from its own processes rather than read off the
 * machine's busy share (/proc/stat), which is printed beside it: the apps and the load
 * generator, the PostgreSQL backends serving the soak's database, and the Redis server (all
 * of it: on a shared Redis, others' commands count too, which errs towards a lighter soak).
 * On a quiet machine the two agree within the rest of the system's work; on a machine shared
 * with other work, the machine's share would calibrate the soak to what the others leave.
 */
import { availableParallelism } from 'node:os';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { machineCpu } from '../support/machine.ts';
import { cpuSeconds } from './probes.ts';

/** The share of the machine's cores the soak aims at ("about half the machine's capacity"). */
export const TARGET_SHARE = 0.5;
/**
 * The fractions of the capacity shares the calibration windows run at, below saturation; 0 is
 * the scripted flows alone, their fixed cost.
 */
export const CALIBRATION_SCALES = [0, 0.25, 0.5] as const;
/**
 * Each window's length, and how much of its start is not measured: the load's first seconds
 * carry what the previous step left (right after the closed-loop capacity measurement, a
 * first trial's two windows cost 1.5 and 1.8 cores, which put the flows' fixed cost at 1.1
 * cores; the soak then ran at 0.7).
 */
export const CALIBRATION_SECONDS = 20;
export const CALIBRATION_UNMEASURED_SECONDS = 5;
/** Bounds of the fitted fraction: a floor, so that a noisy fit still loads the streams; and a ceiling. */
export const SCALE_BOUNDS = { min: 0.05, max: 2 } as const;

/** One calibration window: the streams at `scale` × their share rates, and what that cost. */
export interface CalibrationPoint {
  scale: number;
  /** CPU time the soak caused per second of the window (1 = one core busy). */
  soakCores: number;
  /** Share of the machine's CPU time spent busy meanwhile, whoever spent it. */
  machineBusy: number;
}

export interface Calibration {
  points: CalibrationPoint[];
  cores: number;
  targetCores: number;
  /** The fitted line: soakCores = fixedCores + coresPerScale × scale. */
  fixedCores: number;
  coresPerScale: number;
  /** The fraction of the share rates the soak runs at. */
  scale: number;
  /** Set when the fitted fraction was outside SCALE_BOUNDS, or the fit was unusable. */
  note?: string;
}

/**
 * The fraction of the share rates at which the soak's CPU reaches `targetCores`, from the
 * least-squares line through the calibration points. A line that does not climb (noise, or
 * the machine saturated at both points) falls back to proportion from the heaviest point.
 */
export function fitScale(
  points: readonly CalibrationPoint[],
  cores: number,
  targetShare = TARGET_SHARE,
  bounds: { min: number; max: number } = SCALE_BOUNDS,
): Calibration {
  if (points.length === 0) throw new Error('calibration needs at least one point');
  const targetCores = targetShare * cores;
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.scale, 0) / n;
  const my = points.reduce((s, p) => s + p.soakCores, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.scale - mx) ** 2, 0);
  const sxy = points.reduce((s, p) => s + (p.scale - mx) * (p.soakCores - my), 0);
  let coresPerScale = sxx > 0 ? sxy / sxx : 0;
  let fixedCores = my - coresPerScale * mx;
  let note: string | undefined;
  let scale: number;
  if (coresPerScale > 0 && fixedCores >= 0) {
    scale = (targetCores - fixedCores) / coresPerScale;
  } else {
    // No usable line: everything taken as proportional to the rates.
    const heaviest = points.reduce((a, b) => (b.scale > a.scale ? b : a));
    coresPerScale = heaviest.soakCores / heaviest.scale;
    fixedCores = 0;
    scale = heaviest.soakCores > 0 ? (heaviest.scale * targetCores) / heaviest.soakCores : bounds.max;
    note = 'the calibration points gave no climbing line; scaled in proportion to the heaviest point';
  }
  if (scale < bounds.min || scale > bounds.max) {
    const clamped = Math.min(bounds.max, Math.max(bounds.min, scale));
    note = `${note ? `${note}; ` : ''}fitted fraction ${scale.toFixed(3)} clamped to ${clamped}`;
    scale = clamped;
  }
  return {
    points: [...points],
    cores,
    targetCores,
    fixedCores: round3(fixedCores),
    coresPerScale: round3(coresPerScale),
    scale: round3(scale),
    ...(note ? { note } : {}),
  };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** Every rate times `scale`, at least 1 request/s each. */
export function scaleRates<K extends string>(rates: Record<K, number>, scale: number): Record<K, number> {
  const scaled = {} as Record<K, number>;
  for (const [name, rate] of Object.entries(rates) as [K, number][])
    scaled[name] = Math.max(1, Math.round(rate * scale));
  return scaled;
}

export interface SoakCpuOptions {
  /** The apps' PIDs. */
  pids: number[];
  /** A client connected to another database of the server than `database`. */
  postgres: pg.Client;
  database: string;
  redis: Redis;
}

/** CPU seconds so far of what the soak runs on, to be differenced over a window. */
export interface CpuReading {
  at: number;
  machine: { busy: number; total: number };
  apps: number;
  loadGenerator: number;
  /** By PID: PostgreSQL backends come and go with the pools. */
  postgresBackends: Map<number, number>;
  redis: number;
}

export async function readCpu(o: SoakCpuOptions): Promise<CpuReading> {
  const { rows } = await o.postgres.query<{ pid: number }>(
    'select pid from pg_stat_activity where datname = $1',
    [o.database],
  );
  const postgresBackends = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      postgresBackends.set(pid, cpuSeconds(pid));
    } catch {
      // Ended between the query and the read, or not on this machine's /proc.
    }
  }
  const info = await o.redis.info('cpu');
  const redisField = (name: string) =>
    Number(new RegExp(`^${name}:([\\d.]+)\\r?$`, 'm').exec(info)?.[1] ?? 0);
  const self = process.cpuUsage();
  return {
    at: performance.now(),
    machine: machineCpu(),
    apps: o.pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
    loadGenerator: (self.user + self.system) / 1e6,
    postgresBackends,
    redis: redisField('used_cpu_user') + redisField('used_cpu_sys'),
  };
}

/** What the soak used between two readings, in cores, and how busy the machine was. */
export function cpuBetween(
  a: CpuReading,
  b: CpuReading,
): { soakCores: number; appsAndLoadCores: number; dependencyCores: number; machineBusy: number } {
  const seconds = Math.max(1e-3, (b.at - a.at) / 1000);
  let postgres = 0;
  // A backend that started during the window counts from 0; one that ended is lost (its
  // pool kept it, in practice).
  for (const [pid, used] of b.postgresBackends) postgres += used - (a.postgresBackends.get(pid) ?? 0);
  const appsAndLoad = b.apps - a.apps + (b.loadGenerator - a.loadGenerator);
  const dependencies = postgres + (b.redis - a.redis);
  return {
    soakCores: round3((appsAndLoad + dependencies) / seconds),
    appsAndLoadCores: round3(appsAndLoad / seconds),
    dependencyCores: round3(dependencies / seconds),
    machineBusy: round3((b.machine.busy - a.machine.busy) / Math.max(1, b.machine.total - a.machine.total)),
  };
}

export const machineCores = () => availableParallelism();
