/**
 * What the soak reads from outside the apps: /proc for a process's RSS, its listening sockets
 * and the machine's CPU time; each app's Prometheus listener; PostgreSQL's pg_stat_activity;
 * Redis's INFO. Nothing here talks to the apps' APIs.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { type Metrics, metricValue, parsePrometheus } from './prometheus.ts';
import type { ProcessSample } from './sample.ts';

/** VmRSS of a live process, in bytes. */
export function rssBytes(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kb === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kb) * 1024;
}

/** Reads of `settledRssBytes`, and the time between them. */
export const RSS_READS = 5;
export const RSS_READ_GAP_MS = 100;

/**
 * Each process's RSS as the lowest of RSS_READS reads RSS_READ_GAP_MS apart: the memory it
 * keeps, not a working block in flight at one instant. Admin's login hashes with argon2id at
 * 19 MiB; the block lives for the ~50 ms of one hash and goes back to the OS at once (the
 * fixed MALLOC_MMAP_THRESHOLD_ admin runs with), yet one read that lands in it shows admin
 * 14 % larger. Growth that stays shows in every read, so in the lowest.
 */
export async function settledRssBytes(pids: number[]): Promise<number[]> {
  const lowest = pids.map((pid) => rssBytes(pid));
  for (let i = 1; i < RSS_READS; i++) {
    await new Promise((resolve) => setTimeout(resolve, RSS_READ_GAP_MS));
    pids.forEach((pid, j) => {
      lowest[j] = Math.min(lowest[j] ?? Number.POSITIVE_INFINITY, rssBytes(pid));
    });
  }
  return lowest;
}

/** CPU time (user + system, seconds) a live process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may itself hold spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** USER_HZ: the unit of /proc's CPU times, 100 on every Linux architecture Node runs on. */
const CLOCK_TICKS = 100;

/** TCP ports the process `pid` listens on: its socket inodes matched against /proc/net/tcp{,6}. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // Closed between the listing and the read.
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    const lines = readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1);
    for (const line of lines) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      const local = f[1]?.split(':')[1];
      if (f[3] === '0A' && local && f[9] && inodes.has(f[9])) ports.push(Number.parseInt(local, 16));
    }
  }
  return ports;
}

/**
 * The URL of the metrics listener of the process `pid`, started with `*_METRICS_ADDRESS` at
 * port 0 (every replica of an app gets the same variable, so none could be given a port of
 * its own): of the ports it listens on, the one that answers `GET /metrics` with the text
 * format. `apiPorts` are skipped: a gateway would count the probe as an answer (404) of its
 * own; the other apps' API is gRPC, which an HTTP/1.1 request fails. Undefined while none
 * answers (the listener starts after the API).
 */
export async function findMetricsUrl(
  pid: number,
  apiPorts: ReadonlySet<number>,
): Promise<string | undefined> {
  for (const port of listeningPorts(pid)) {
    if (apiPorts.has(port)) continue;
    const url = `http://127.0.0.1:${port}/metrics`;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      const text = await res.text();
      if (res.status === 200 && text.includes('nodejs_heap_size_used_bytes')) return url;
    } catch {
      // Not HTTP/1.1 (a gRPC port), or it went away.
    }
  }
  return undefined;
}

export async function scrape(url: string): Promise<Metrics> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return parsePrometheus(await res.text());
}

/** A process's sample from its RSS (settledRssBytes) and its metrics; `cpuCores` when an interval ended. */
export function processSample(
  name: string,
  rss: number,
  metrics: Metrics,
  cpuCores: number | undefined,
): ProcessSample {
  const read = (metric: string) => {
    const value = metricValue(metrics, metric);
    if (value === undefined) throw new Error(`${name} exports no ${metric}`);
    return value;
  };
  return {
    name,
    rssBytes: rss,
    heapUsedBytes: read('nodejs_heap_size_used_bytes'),
    heapTotalBytes: read('nodejs_heap_size_total_bytes'),
    externalBytes: read('nodejs_external_memory_bytes'),
    loopDelayP99Seconds: read('nodejs_eventloop_lag_p99_seconds'),
    activeHandles: read('nodejs_active_handles_total'),
    ...(cpuCores === undefined ? {} : { cpuCores }),
  };
}

/** Backends connected to `database`, by application_name; `client` must be connected to another database. */
export async function postgresConnections(
  client: pg.Client,
  database: string,
): Promise<{ connections: number; byApplication: Record<string, number> }> {
  const { rows } = await client.query<{ app: string; n: number }>(
    `select coalesce(nullif(application_name, ''), '(none)') as app, count(*)::int as n
       from pg_stat_activity where datname = $1 group by 1 order by 1`,
    [database],
  );
  return {
    connections: rows.reduce((sum, r) => sum + r.n, 0),
    byApplication: Object.fromEntries(rows.map((r) => [r.app, r.n])),
  };
}

/** Keys under `prefix` (SCAN may count one twice while Redis rehashes: fine for a trend), and the server's used_memory. */
export async function redisSample(
  redis: Redis,
  prefix: string,
): Promise<{ usedMemoryBytes: number; keys: number }> {
  const used = /^used_memory:(\d+)\r?$/m.exec(await redis.info('memory'))?.[1];
  if (used === undefined) throw new Error('no used_memory in INFO memory');
  let keys = 0;
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    keys += found.length;
  } while (cursor !== '0');
  return { usedMemoryBytes: Number(used), keys };
}

/** Deletes every key under `prefix`. */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (found.length) await redis.del(...found);
  } while (cursor !== '0');
}
