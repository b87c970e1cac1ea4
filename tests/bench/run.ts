/**
 * `pnpm bench`: boots the distributed mode on 127.0.0.1 (PostgreSQL + Redis), warms up, loads
 * the hot paths with autocannon and prints every figure next to baselines measured alongside:
 * raw Ed25519 signing with node:crypto (one core) and a Fastify hello-world (same connections).
 * BENCH_ROUNDS rounds (default 3); in each, hello and JWKS alternate in four short slices, and so
 * do the sign rate and issuance (from enough connections to keep the machine busy, see
 * ISSUANCE_CONNECTIONS; then once from 64 for comparison), so that this shared VM's drift falls
 * on both sides of a ratio;
 * then issuance runs at half that rate for the p99 goal, as an open-loop load at a steady rate
 * (paced.ts: autocannon's own rate limit sends in bursts). The median round is reported. Results
 * also go to tests/bench/results/latest.json. Everything stops itself.
 *
 * BENCH_GRPC_TLS=1: every gRPC link runs over mutual TLS (a CA and per-app certificates made for
 * the run, as tests/support/tls.ts does for the e2e suites), to compare the cost per credential
 * with a run without it (docs/performance.md).
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { startDistributed } from '../support/distributed.ts';
import { machineCpu } from '../support/machine.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, ROOT, startProcess } from '../support/processes.ts';
import { SystemTls } from '../support/tls.ts';
import { paced } from './paced.ts';
import { measureStorageCosts } from './storage-costs.ts';

const DATABASE_URL =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DURATION = Number(process.env.BENCH_DURATION_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
/**
 * Connections of the issuance load, which measures capacity: the rate the service sustains.
 * A closed-loop load carries at most `connections` requests at once, each crossing five
 * processes, and the gateway and the issuer batch what is in flight together (one stream
 * message, one Redis script run, one INSERT per batch). From 64 connections the machine stays
 * about 30 % idle and the rate is bounded by the load generator's concurrency (64 in flight /
 * ~9 ms); from 128 the batches are larger and a credential costs less CPU (measured here: ~205
 * µs of machine CPU per credential at 64, ~165 at 128), and from 256 the rate grows a little
 * more at twice the latency. 128 is the default; each round also measures 64 for comparison,
 * and every issuance figure is printed with how busy the machine was.
 */
const ISSUANCE_CONNECTIONS = Number(process.env.BENCH_ISSUANCE_CONNECTIONS ?? 128);
/**
 * Rounds of measurement, each with its own baselines (sign, hello) right before the paths it
 * compares with them. The speed of a shared VM drifts by ±20 % over minutes; a ratio taken
 * within one round stays comparable, and the median round of several is what gets reported.
 */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/** Mutual TLS on every gRPC link (BENCH_GRPC_TLS=1). */
const GRPC_TLS = process.env.BENCH_GRPC_TLS === '1';
/** Slices per comparison within a round (see the round loop). */
const SLICES = 4;
const SLICE_SECONDS = Math.max(1, Math.round(DURATION / SLICES));

/** CPU time (µs) a process has used so far, from /proc (Linux). */
function cpuMicros(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
    return (ticks * 1_000_000) / 100; // USER_HZ = 100
  } catch {
    return 0;
  }
}

/** CPU time (µs) used so far by every process whose command name is `comm` (e.g. redis-server, postgres). */
function cpuMicrosOf(comm: string): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === comm)
        total += cpuMicros(Number(entry));
    } catch {
      // The process ended meanwhile.
    }
  }
  return total;
}

/** The storage servers on this machine: their CPU per request is part of the cost too. */
const STORAGE = ['postgres', 'redis-server'];

/** Runs `fn` and reports the CPU µs each process spent per request. */
async function profiled(
  procs: Proc[],
  fn: () => Promise<Load>,
  seconds = DURATION,
): Promise<Load & { cpu_us_per_request: Record<string, number>; machine_busy: number }> {
  const before = procs.map((p) => cpuMicros(p.child.pid));
  const machine0 = machineCpu();
  // PostgreSQL backends live as long as the services' pools, so before/after sums hold.
  const storageBefore = STORAGE.map(cpuMicrosOf);
  const self0 = process.cpuUsage();
  const result = await fn();
  const self1 = process.cpuUsage(self0);
  const machine1 = machineCpu();
  const storageAfter = STORAGE.map(cpuMicrosOf);
  const requests = Math.max(1, result.rps * seconds);
  const cpu: Record<string, number> = {};
  procs.forEach((p, i) => {
    const used = cpuMicros(p.child.pid) - (before[i] ?? 0);
    if (used > 0) cpu[p.name.replace(/^bench-/, '')] = Math.round(used / requests);
  });
  cpu['load-generator'] = Math.round((self1.user + self1.system) / requests);
  STORAGE.forEach((name, i) => {
    // A PostgreSQL backend that ended during the slice takes its CPU time with it: then the
    // figure is a lower bound (never below 0).
    cpu[name] = Math.max(0, Math.round(((storageAfter[i] ?? 0) - (storageBefore[i] ?? 0)) / requests));
  });
  const machineBusy = (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total);
  return { ...result, cpu_us_per_request: cpu, machine_busy: +machineBusy.toFixed(3) };
}

interface Load {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function load(
  url: string,
  options: {
    duration?: number;
    method?: 'GET' | 'POST';
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
  } = {},
): Promise<Load> {
  const r = await autocannon({
    url,
    connections: options.connections ?? CONNECTIONS,
    duration: options.duration ?? DURATION,
    method: options.method ?? 'GET',
    headers: options.headers ?? {},
    body: options.body,
  });
  return {
    rps: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
  };
}

/** Several slices of one load as one: mean rate, median p50, worst p99, all failures. */
function combine<T extends Load>(slices: T[]): Load {
  const sorted = slices.map((l) => l.p50).sort((x, y) => x - y);
  return {
    rps: Math.round(slices.reduce((sum, l) => sum + l.rps, 0) / slices.length),
    p50: sorted[Math.floor(sorted.length / 2)] ?? 0,
    p99: Math.max(...slices.map((l) => l.p99)),
    non2xx: slices.reduce((sum, l) => sum + l.non2xx, 0),
    errors: slices.reduce((sum, l) => sum + l.errors, 0),
  };
}

/** Mean machine CPU busy share over profiled slices of equal length. */
function meanBusy(slices: { machine_busy: number }[]): number {
  return +(slices.reduce((sum, l) => sum + l.machine_busy, 0) / Math.max(1, slices.length)).toFixed(3);
}

/** Mean CPU µs per request of each process over profiled slices of equal length. */
function meanCpu(slices: { cpu_us_per_request: Record<string, number> }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const name of Object.keys(slices[0]?.cpu_us_per_request ?? {})) {
    out[name] = Math.round(
      slices.reduce((sum, l) => sum + (l.cpu_us_per_request[name] ?? 0), 0) / slices.length,
    );
  }
  return out;
}

/** Ed25519 signatures per second on one core, over a typical JWS signing input (~300 bytes). */
function signRate(ms: number): number {
  const { privateKey } = generateKeyPairSync('ed25519');
  const input = Buffer.from(
    `${randomBytes(40).toString('base64url')}.${randomBytes(180).toString('base64url')}`,
  );
  for (let i = 0; i < 2_000; i++) sign(null, input, privateKey);
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    for (let i = 0; i < 200; i++) sign(null, input, privateKey);
    n += 200;
  }
  return Math.round((n * 1000) / (performance.now() - start));
}

const pct = (share: number) => `${Math.round(share * 100)} %`;

async function json(res: Response): Promise<any> {
  if (!res.ok) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

async function main(): Promise<void> {
  const procs: Proc[] = [];
  const dbName = `rp_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  const dbUrl = new URL(DATABASE_URL);
  dbUrl.pathname = `/${dbName}`;
  // The cap and the per-key rate set high, so the benchmark measures issuance, not 402s or 429s
  // (the rate is still counted: the gateway spends Redis leases, as in production).
  const plansFile = join(mkdtempSync(join(tmpdir(), 'rp-bench-')), 'plans.yaml');
  writeFileSync(
    plansFile,
    'plans:\n  enterprise:\n    limits: { max_concurrent_connections: 10000000, max_issuance_per_second_per_key: 1000000 }\n',
  );
  const tls = GRPC_TLS ? SystemTls.create() : undefined;
  try {
    const owner = { email: 'bench@example.test', password: randomBytes(18).toString('base64url') };
    const system = await startDistributed({
      ...(tls ? { tls } : {}),
      label: 'bench',
      databaseUrl: dbUrl.toString(),
      redisUrl: REDIS_URL,
      redisPrefix: `bench:${dbName}:`,
      kek: randomBytes(32).toString('base64'),
      bootstrap: owner,
      logLevel: 'warn',
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plansFile,
        // BENCH_PROFILE=<dir>: every service writes a V8 CPU profile there when it stops.
        ...(process.env.BENCH_PROFILE
          ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROFILE}` }
          : {}),
      },
    });
    procs.push(...system.procs);
    const base = system.baseUrl;
    const helloPort = await freePort();
    procs.push(startProcess('bench-hello', 'tests/bench/hello-server.ts', { PORT: String(helloPort) }));
    const hello = `http://127.0.0.1:${helloPort}/`;
    await waitFor(async () => (await fetch(hello)).status === 200, 20_000, 'the hello server');

    const post = (path: string, body: object, headers: Record<string, string> = {}) =>
      fetch(base + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const { token } = await json(await post('/admin/v1/auth/login', owner));
    const auth = { authorization: `Bearer ${token}` };
    const project = await json(await post('/admin/v1/projects', { name: 'bench' }, auth));
    const { key } = await json(
      await post(`/admin/v1/projects/${project.id}/api-keys`, { name: 'bench' }, auth),
    );
    const issue = {
      method: 'POST' as const,
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ ttl_seconds: 60 }),
    };

    console.log('warm-up (3 s each)…');
    await load(hello, { duration: 3 });
    await load(`${base}/v1/credentials/jwks`, { duration: 3 });
    await load(`${base}/api/v1/credentials`, { duration: 3, ...issue, connections: ISSUANCE_CONNECTIONS });
    await paced({
      url: `${base}/api/v1/credentials`,
      ...issue,
      rate: 1_000,
      durationSeconds: 2,
      connections: CONNECTIONS,
    });

    console.log(
      `measuring: ${ROUNDS} round(s) of sign, hello, JWKS (${CONNECTIONS} connections), issuance (${ISSUANCE_CONNECTIONS} connections, then ${CONNECTIONS}), half rate (${DURATION} s each)…`,
    );
    const rounds = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Each comparison interleaves its two sides in short slices, so that the VM's drift falls on
      // both alike: hello and JWKS alternate; the sign rate (one core, in this process, the
      // services idle) alternates with issuance.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const hellos: Load[] = [];
      const jwksSlices: Load[] = [];
      for (let i = 0; i < SLICES; i++) {
        hellos.push(await load(hello, { duration: SLICE_SECONDS }));
        jwksSlices.push(await load(`${base}/v1/credentials/jwks`, { duration: SLICE_SECONDS }));
      }
      const signs: number[] = [];
      const issuances: (Load & { cpu_us_per_request: Record<string, number>; machine_busy: number })[] = [];
      for (let i = 0; i < SLICES; i++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        signs.push(signRate(500));
        issuances.push(
          await profiled(
            system.procs,
            () =>
              load(`${base}/api/v1/credentials`, {
                ...issue,
                duration: SLICE_SECONDS,
                connections: ISSUANCE_CONNECTIONS,
              }),
            SLICE_SECONDS,
          ),
        );
      }
      // The same load from fewer connections, for comparison (see ISSUANCE_CONNECTIONS).
      const fewerSeconds = Math.max(1, Math.round(DURATION / 2));
      const fewer = await profiled(
        system.procs,
        () => load(`${base}/api/v1/credentials`, { ...issue, duration: fewerSeconds }),
        fewerSeconds,
      );
      const sign = Math.round(signs.reduce((sum, x) => sum + x, 0) / signs.length);
      const helloRound = combine(hellos);
      const jwksRound = combine(jwksSlices);
      const issuanceRound = {
        ...combine(issuances),
        cpu_us_per_request: meanCpu(issuances),
        machine_busy: meanBusy(issuances),
      };
      const halfRound = await paced({
        url: `${base}/api/v1/credentials`,
        ...issue,
        rate: Math.max(1, Math.round(issuanceRound.rps / 2)),
        durationSeconds: DURATION,
        connections: CONNECTIONS,
      });
      rounds.push({
        sign,
        hello: helloRound,
        jwks: jwksRound,
        issuance: issuanceRound,
        fewer,
        half: halfRound,
      });
      console.log(
        `  round ${r + 1}: sign ${sign}/s, hello ${helloRound.rps}/s, JWKS ${(jwksRound.rps / helloRound.rps).toFixed(2)}× hello, ` +
          `issuance ${issuanceRound.rps}/s = ${(issuanceRound.rps / sign).toFixed(2)}× sign (machine ${pct(issuanceRound.machine_busy)} busy; ` +
          `${CONNECTIONS} connections: ${fewer.rps}/s = ${(fewer.rps / sign).toFixed(2)}×, ${pct(fewer.machine_busy)} busy), half-rate p99 ${halfRound.p99} ms`,
      );
    }
    // The round whose issuance ratio is the median; JWKS as its median over the rounds.
    const byIssuance = [...rounds].sort((a, b) => a.issuance.rps / a.sign - b.issuance.rps / b.sign);
    const median = byIssuance[Math.floor(byIssuance.length / 2)] ?? rounds[0];
    if (!median) throw new Error('no round measured');
    const jwksRatios = rounds.map((r) => r.jwks.rps / r.hello.rps).sort((a, b) => a - b);
    const sign1 = median.sign;
    const helloRun = median.hello;
    const jwks = median.jwks;
    const issuance = median.issuance;
    const half = median.half;
    const fewer = median.fewer;
    const jwksMedianRatio = jwksRatios[Math.floor(jwksRatios.length / 2)] ?? 0;

    // What a credential costs Redis and PostgreSQL (docs/capacity.md), at half the median
    // round's rate: a steady load like the p99 goal's, counted by the servers themselves.
    const storageRate = Math.max(1, Math.round(median.issuance.rps / 2));
    const storage = await measureStorageCosts(dbUrl.toString(), REDIS_URL, () =>
      paced({
        url: `${base}/api/v1/credentials`,
        ...issue,
        rate: storageRate,
        durationSeconds: DURATION,
        connections: CONNECTIONS,
      }),
    );

    const results = {
      date: new Date().toISOString(),
      node: process.version,
      grpc_tls: GRPC_TLS,
      duration_seconds: DURATION,
      connections: CONNECTIONS,
      baseline: { ed25519_sign_per_s_1_core: sign1, fastify_hello: helloRun },
      rounds: rounds.map((r) => ({
        ed25519_sign_per_s_1_core: r.sign,
        hello_rps: r.hello.rps,
        jwks_rps: r.jwks.rps,
        jwks_ratio_to_hello: +(r.jwks.rps / r.hello.rps).toFixed(3),
        issuance_rps: r.issuance.rps,
        issuance_ratio_to_sign: +(r.issuance.rps / r.sign).toFixed(3),
        issuance_machine_busy: r.issuance.machine_busy,
        issuance_rps_at_bench_connections: r.fewer.rps,
        issuance_ratio_to_sign_at_bench_connections: +(r.fewer.rps / r.sign).toFixed(3),
        issuance_machine_busy_at_bench_connections: r.fewer.machine_busy,
        half_rate_p99_ms: r.half.p99,
      })),
      jwks: { ...jwks, ratio_to_hello: +jwksMedianRatio.toFixed(3) },
      issuance: {
        ...issuance,
        connections: ISSUANCE_CONNECTIONS,
        ratio_to_sign: +(issuance.rps / sign1).toFixed(3),
      },
      issuance_at_bench_connections: {
        ...fewer,
        connections: CONNECTIONS,
        ratio_to_sign: +(fewer.rps / sign1).toFixed(3),
      },
      issuance_half_load: half,
      per_credential: { at_rate_per_s: storageRate, ...storage },
      goals: {
        issuance_ratio_to_sign_at_least: 0.25,
        issuance_half_load_p99_ms_under: 25,
        jwks_ratio_to_hello_at_least: 0.9,
      },
    };
    const row = (name: string, l: Load, ratio?: string) =>
      `${name.padEnd(36)} ${String(l.rps).padStart(8)} req/s  p50 ${String(l.p50).padStart(4)} ms  p99 ${String(l.p99).padStart(4)} ms${ratio ? `  ${ratio}` : ''}${l.non2xx || l.errors ? `  (non-2xx ${l.non2xx}, errors ${l.errors})` : ''}`;
    console.log('');
    console.log(
      `median round of ${ROUNDS} (by issuance ratio; JWKS ratio: median over the rounds); gRPC links: ${GRPC_TLS ? 'mutual TLS' : 'plaintext'}:`,
    );
    console.log(`${'Ed25519 sign, node:crypto, 1 core'.padEnd(36)} ${String(sign1).padStart(8)} sig/s`);
    console.log(row('Fastify hello-world (baseline)', helloRun));
    console.log(
      row('GET /v1/credentials/jwks', jwks, `${results.jwks.ratio_to_hello.toFixed(2)}× hello (goal ≥ 0.90)`),
    );
    console.log(
      row(
        `POST /api/v1/credentials, ${ISSUANCE_CONNECTIONS} conn.`,
        issuance,
        `${results.issuance.ratio_to_sign.toFixed(2)}× sign (goal ≥ 0.25), machine ${pct(issuance.machine_busy)} busy`,
      ),
    );
    console.log(
      row(
        `POST /api/v1/credentials, ${CONNECTIONS} conn.`,
        fewer,
        `${results.issuance_at_bench_connections.ratio_to_sign.toFixed(2)}× sign, machine ${pct(fewer.machine_busy)} busy`,
      ),
    );
    console.log(
      `${'POST /api/v1/credentials, half rate'.padEnd(36)} ${String(half.rps).padStart(8)} req/s  p50 ${half.p50} ms  p90 ${half.p90} ms  p99 ${half.p99} ms  max ${half.max} ms  (steady, open loop; goal: p99 < 25 ms)${half.non2xx || half.errors ? `  (non-2xx ${half.non2xx}, errors ${half.errors})` : ''}`,
    );
    console.log(
      `CPU per issued credential (µs): ${Object.entries(issuance.cpu_us_per_request)
        .map(([name, us]) => `${name} ${us}`)
        .join(', ')}`,
    );
    console.log(
      `per credential at ${storageRate}/s (${storage.credentials} credentials): Redis ${storage.redis.commands_per_credential} commands ` +
        `(${Object.entries(storage.redis.top_commands_per_credential)
          .map(([name, n]) => `${name} ${n}`)
          .join(
            ', ',
          )}), ${storage.redis.net_input_bytes_per_credential} B in / ${storage.redis.net_output_bytes_per_credential} B out; ` +
        `PostgreSQL ${storage.postgres.transactions_per_credential} transactions, ${storage.postgres.rows_written_per_credential} rows written, ` +
        `${storage.postgres.wal_bytes_per_credential} B of WAL (${storage.postgres.wal_scope}), ${storage.postgres.credential_row_bytes} B per stored credential (table and indexes); ` +
        `commit latency p50 ${storage.postgres.commit_latency_ms.p50} ms, p99 ${storage.postgres.commit_latency_ms.p99} ms`,
    );
    const dir = join(ROOT, 'tests', 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    if (rounds.some((r) => [r.jwks, r.issuance, r.fewer, r.half].some((l) => l.non2xx || l.errors)))
      throw new Error('requests failed during the benchmark');
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    tls?.destroy();
    await admin.query(`drop database if exists "${dbName}" with (force)`);
    await admin.end();
  }
}

await main();
