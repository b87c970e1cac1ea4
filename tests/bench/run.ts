/**
 * `pnpm bench`: measures credential issuance in each mode against the peer (node-oidc-provider
 * issuing EdDSA JWT access tokens by `client_credentials`, one Node process: peer-oidc.ts) and
 * against the raw single-core Ed25519 sign rate, and JWKS against a Fastify hello-world, all in
 * one run (issue 20). The modes, one after the other, each started for its turn and stopped after
 * it (BENCH_MODES, comma-separated; default all three):
 *
 * - `embedded`: `apps/embedded/src/main.ts`, the four services in one process on PGlite in a
 *   fresh data directory (what `pnpm start` runs);
 * - `distributed`: one process per app, 1 gateway × 1 issuer, on PostgreSQL and Redis;
 * - `distributed-2x2`: 2 gateways × 2 issuers (one admin, one billing), the load spread over both
 *   gateways (autocannon's connections alternate between their URLs).
 *
 * In each of BENCH_ROUNDS rounds (default 3) of a mode: hello-world and JWKS alternate in four
 * short slices; the sign rate (one core, in this process, the services idle), the peer and the
 * mode's issuance alternate in four slices (the peer and issuance taking turns at going first),
 * so that this shared VM's drift falls on both sides of every ratio; then issuance at half the
 * round's rate as a steady open-loop load (paced.ts: autocannon's own rate limit sends in
 * bursts) for the p99. Every ratio is taken within its round and the median over the rounds is
 * reported (report.ts), with how busy the machine's cores were (/proc/stat) during each load.
 * The peer and issuance use the same connections (BENCH_ISSUANCE_CONNECTIONS), hello and JWKS
 * BENCH_CONNECTIONS. Distributed 1×1 also measures issuance from BENCH_CONNECTIONS (for
 * comparison with earlier runs) and what a credential costs PostgreSQL and Redis. Results also
 * go to tests/bench/results/latest.json. Everything stops itself.
 *
 * BENCH_GRPC_TLS=1: every gRPC link of the distributed modes runs over mutual TLS (a CA and
 * per-app certificates made for the run, as tests/support/tls.ts does for the e2e suites).
 *
 * Tracing: every OTEL_* variable of the bench's own environment is given to every app it starts
 * (docs/tracing.md). BENCH_OTLP_SINK=1 also starts an OTLP/HTTP receiver in the bench process that
 * accepts and counts what the apps export, and points OTEL_EXPORTER_OTLP_ENDPOINT at it: the cost
 * of tracing measured without a collector on the machine (docs/performance.md).
 */
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { startDistributed } from '../support/distributed.ts';
import { machineCpu } from '../support/machine.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, ROOT, startProcess } from '../support/processes.ts';
import { SystemTls } from '../support/tls.ts';
import { type PacedResult, paced } from './paced.ts';
import { awaitOutput, type Peer, startPeer } from './peer.ts';
import { measureRelayAuth, type RelayAuthFigures } from './relay-auth.ts';
import {
  formatGoal,
  goals,
  MODE_LABELS,
  type Mode,
  type ModeSummary,
  parseModes,
  type RoundFigures,
  ratio,
  summarize,
} from './report.ts';
import { measureStorageCosts, type StorageCosts } from './storage-costs.ts';
import { measureWebhooks, type WebhookFigures } from './webhooks.ts';

/**
 * The bench's plans file: the cap and the per-key rate set high, so a benchmark measures issuance,
 * not 402s or 429s (the rate is still counted: the gateway spends its leases, as in production).
 */
export const BENCH_PLANS =
  'plans:\n  enterprise:\n    limits: { max_concurrent_connections: 10000000, max_issuance_per_second_per_key: 1000000 }\n';

export const DATABASE_URL =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DURATION = Number(process.env.BENCH_DURATION_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
/**
 * Connections of the issuance load (and the peer's), which measures capacity: the rate the
 * service sustains. A closed-loop load carries at most `connections` requests at once, and the
 * gateway and the issuer batch what is in flight together (one stream message, one Redis script
 * run, one INSERT per batch). In the distributed mode, from 64 connections the machine stays
 * about 30 % idle and the rate is bounded by the load generator's concurrency (64 in flight /
 * ~9 ms); from 128 the batches are larger and a credential costs less CPU (measured here: ~205
 * µs of machine CPU per credential at 64, ~165 at 128), and from 256 the rate grows a little
 * more at twice the latency. 128 is the default; distributed 1×1 also measures 64 for
 * comparison, and every issuance figure is printed with how busy the machine was.
 */
const ISSUANCE_CONNECTIONS = Number(process.env.BENCH_ISSUANCE_CONNECTIONS ?? 128);
/**
 * Rounds of measurement, each with its own baselines (sign, peer, hello) right beside the paths
 * it compares with them. The speed of a shared VM drifts by ±20 % over minutes; a ratio taken
 * within one round stays comparable, and the median over several is what gets reported.
 */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const MODES_RUN = parseModes(process.env.BENCH_MODES);
/** BENCH_RELAY_AUTH=0 skips the relay-session decisions (relay-auth.ts) after each mode. */
const RELAY_AUTH = process.env.BENCH_RELAY_AUTH !== '0';
/** BENCH_WEBHOOKS=0 skips the webhook deliveries (webhooks.ts) after each mode. */
const WEBHOOKS = process.env.BENCH_WEBHOOKS !== '0';
/** The webhooks part delivers to a receiver on 127.0.0.1. */
const WEBHOOK_ENV = { RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: 'true' };
/** Mutual TLS on every gRPC link of the distributed modes (BENCH_GRPC_TLS=1). */
const GRPC_TLS = process.env.BENCH_GRPC_TLS === '1';
/** Slices per comparison within a round (see the round loop). */
const SLICES = 4;
const SLICE_SECONDS = Math.max(1, Math.round(DURATION / SLICES));
/** Busier than this at rest, a mode's figures are flagged as taken on a machine others were using. */
const BUSY_AT_REST_WARNING = 0.25;
/** What each mode measures beyond issuance against the sign rate and the peer. */
const PLAN: Record<Mode, { jwks: boolean; half: boolean; fewer: boolean; storage: boolean }> = {
  embedded: { jwks: true, half: true, fewer: false, storage: false },
  distributed: { jwks: true, half: true, fewer: true, storage: true },
  'distributed-2x2': { jwks: false, half: false, fewer: false, storage: false },
};

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

export interface Load {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

export type Profiled = Load & { cpu_us_per_request: Record<string, number>; machine_busy: number };

/** Runs `fn` and reports the CPU µs each process spent per request, and the machine's busy share. */
export async function profiled(
  procs: Proc[],
  fn: () => Promise<Load>,
  seconds: number,
  storage = true,
): Promise<Profiled> {
  const before = procs.map((p) => cpuMicros(p.child.pid));
  const machine0 = machineCpu();
  // PostgreSQL backends live as long as the services' pools, so before/after sums hold.
  const storageBefore = storage ? STORAGE.map(cpuMicrosOf) : [];
  const self0 = process.cpuUsage();
  const result = await fn();
  const self1 = process.cpuUsage(self0);
  const machine1 = machineCpu();
  const storageAfter = storage ? STORAGE.map(cpuMicrosOf) : [];
  const requests = Math.max(1, result.rps * seconds);
  const cpu: Record<string, number> = {};
  procs.forEach((p, i) => {
    const used = cpuMicros(p.child.pid) - (before[i] ?? 0);
    if (used > 0) cpu[p.name.replace(/^bench(-2x2)?-/, '')] = Math.round(used / requests);
  });
  cpu['load-generator'] = Math.round((self1.user + self1.system) / requests);
  if (storage) {
    STORAGE.forEach((name, i) => {
      // A PostgreSQL backend that ended during the slice takes its CPU time with it: then the
      // figure is a lower bound (never below 0).
      cpu[name] = Math.max(0, Math.round(((storageAfter[i] ?? 0) - (storageBefore[i] ?? 0)) / requests));
    });
  }
  const machineBusy = (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total);
  return { ...result, cpu_us_per_request: cpu, machine_busy: +machineBusy.toFixed(3) };
}

export async function load(
  url: string | string[],
  options: {
    duration?: number;
    method?: 'GET' | 'POST';
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
  } = {},
): Promise<Load> {
  const r = await autocannon({
    // Several URLs (the gateways of a scale-out): autocannon gives connection i the URL i mod n.
    url: url as string,
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

/** Profiled slices as one: combined, with the mean CPU per request and busy share. */
function combineProfiled(slices: Profiled[]): Profiled {
  const cpu: Record<string, number> = {};
  for (const name of Object.keys(slices[0]?.cpu_us_per_request ?? {})) {
    cpu[name] = Math.round(
      slices.reduce((sum, l) => sum + (l.cpu_us_per_request[name] ?? 0), 0) / slices.length,
    );
  }
  return {
    ...combine(slices),
    cpu_us_per_request: cpu,
    machine_busy: +(slices.reduce((sum, l) => sum + l.machine_busy, 0) / Math.max(1, slices.length)).toFixed(
      3,
    ),
  };
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
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function json(res: Response): Promise<any> {
  if (!res.ok) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

/** One mode, started and ready to be loaded. */
export interface Target {
  mode: Mode;
  /** The gateways' base URLs. */
  urls: string[];
  /** Every process of the mode, for the CPU per credential. */
  procs: Proc[];
  /** What every issuance request sends. */
  issue: { method: 'POST'; headers: Record<string, string>; body: string };
  /** Distributed: the bench's own database, for the storage costs. */
  databaseUrl?: string;
  /** The first owner (a platform administrator): registers the relay of the relay-auth part. */
  owner: { email: string; password: string };
  stop(): Promise<void>;
}

/** The owner's API key, made through the HTTP API the way a newcomer would. */
export async function apiKey(base: string, owner: { email: string; password: string }): Promise<string> {
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
  return key;
}

export const issueRequest = (key: string): Target['issue'] => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', 'x-api-key': key },
  body: JSON.stringify({ ttl_seconds: 60 }),
});

/** BENCH_PROFILE=<dir>: every service writes a V8 CPU profile there when it stops. */
/** Where BENCH_OTLP_SINK's receiver listens, once started. */
let otlpSink: { endpoint: string; requests: number; bytes: number } | undefined;

/**
 * An OTLP/HTTP receiver that answers 200 to every export and counts them (BENCH_OTLP_SINK=1: every
 * app the bench starts exports to it; `everyApp: false`, only those given its endpoint).
 */
export async function startOtlpSink(
  everyApp = true,
): Promise<{ endpoint: string; requests: number; bytes: number; close: () => Promise<void> }> {
  const sink = { endpoint: '', requests: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => {
      sink.bytes += chunk.length;
    });
    req.on('end', () => {
      sink.requests++;
      res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sink.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  if (everyApp) otlpSink = sink;
  return Object.assign(sink, { close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
}

/** What every app the bench starts gets besides its own settings: Node options, profiling, and tracing. */
const profileEnv = (): Record<string, string> => {
  const env: Record<string, string> = {};
  const nodeOptions = [
    process.env.BENCH_NODE_OPTIONS,
    process.env.BENCH_PROFILE && `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROFILE}`,
  ].filter(Boolean);
  if (nodeOptions.length > 0) env.NODE_OPTIONS = nodeOptions.join(' ');
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith('OTEL_') && value !== undefined) env[name] = value;
  }
  if (otlpSink && !env.OTEL_EXPORTER_OTLP_ENDPOINT) env.OTEL_EXPORTER_OTLP_ENDPOINT = otlpSink.endpoint;
  return env;
};

async function startEmbedded(plansFile: string): Promise<Target> {
  const dataDir = mkdtempSync(join(tmpdir(), 'rp-bench-embedded-'));
  const owner = { email: 'bench@example.test', password: randomBytes(18).toString('base64url') };
  const port = await freePort();
  const proc = startProcess('bench-embedded', 'apps/embedded/src/main.ts', {
    RELAYPLANE_DATA_DIR: dataDir,
    PORT: String(port),
    LOG_LEVEL: 'warn',
    RELAYPLANE_KEK: randomBytes(32).toString('base64'),
    RELAYPLANE_BOOTSTRAP_EMAIL: owner.email,
    RELAYPLANE_BOOTSTRAP_PASSWORD: owner.password,
    RELAYPLANE_PLANS_FILE: plansFile,
    ...WEBHOOK_ENV,
    ...profileEnv(),
  });
  const stop = async () => {
    await proc.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await awaitOutput(proc, /Relayplane is running/, 90_000);
    const base = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, 30_000, 'embedded /readyz');
    const key = await apiKey(base, owner);
    return { mode: 'embedded', urls: [base], procs: [proc], issue: issueRequest(key), owner, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A variant of a mode (`ab.ts`): its own process names, more variables, another checkout's code. */
export interface Variant {
  label: string;
  env?: Record<string, string>;
  root?: string;
}

export async function startDistributedMode(
  mode: 'distributed' | 'distributed-2x2',
  plansFile: string,
  admin: pg.Client,
  tls: SystemTls | undefined,
  variant?: Variant,
): Promise<Target> {
  const dbName = `rp_bench_${randomBytes(4).toString('hex')}`;
  await admin.query(`create database "${dbName}"`);
  const dbUrl = new URL(DATABASE_URL);
  dbUrl.pathname = `/${dbName}`;
  const drop = () => admin.query(`drop database if exists "${dbName}" with (force)`);
  const owner = { email: 'bench@example.test', password: randomBytes(18).toString('base64url') };
  const n = mode === 'distributed' ? 1 : 2;
  try {
    const system = await startDistributed({
      ...(tls ? { tls } : {}),
      label: variant?.label ?? (mode === 'distributed' ? 'bench' : 'bench-2x2'),
      ...(variant?.root ? { root: variant.root } : {}),
      databaseUrl: dbUrl.toString(),
      redisUrl: REDIS_URL,
      redisPrefix: `bench:${dbName}:`,
      kek: randomBytes(32).toString('base64'),
      bootstrap: owner,
      logLevel: 'warn',
      replicas: { gateway: n, issuer: n },
      extraEnv: { RELAYPLANE_PLANS_FILE: plansFile, ...WEBHOOK_ENV, ...profileEnv(), ...variant?.env },
    });
    const stop = async () => {
      await system.stop();
      await drop();
    };
    try {
      const key = await apiKey(system.baseUrl, owner);
      return {
        mode,
        urls: system.baseUrls,
        procs: system.procs,
        issue: issueRequest(key),
        databaseUrl: dbUrl.toString(),
        owner,
        stop,
      };
    } catch (err) {
      await stop();
      throw err;
    }
  } catch (err) {
    await drop();
    throw err;
  }
}

/** What one round of one mode measured, in full. */
interface Round {
  machine_busy_at_rest: number;
  /** The mode's own processes' share of the machine in that second. */
  mode_busy_at_rest: number;
  sign: number;
  peer: Profiled;
  issuance: Profiled;
  hello?: Load;
  jwks?: Load;
  fewer?: Profiled;
  half?: PacedResult;
}

interface ModeResult {
  mode: Mode;
  gateways: number;
  rounds: Round[];
  summary: ModeSummary;
  /** Mean over every issuance slice of the mode. */
  cpu_us_per_credential: Record<string, number>;
  machine_busy_issuance: number;
  machine_busy_peer: number;
  /** Mean over the rounds of the second at rest before each: the machine's busy share, the mode's part of it. */
  machine_busy_at_rest: number;
  mode_busy_at_rest: number;
  storage?: { at_rate_per_s: number } & StorageCosts;
  /** Relay session decisions (relay-auth.ts), unless BENCH_RELAY_AUTH=0. */
  relay_auth?: RelayAuthFigures;
  /** Webhook deliveries (webhooks.ts), unless BENCH_WEBHOOKS=0. */
  webhooks?: WebhookFigures;
}

const figures = (r: Round): RoundFigures => ({
  sign: r.sign,
  peer: r.peer.rps,
  issuance: r.issuance.rps,
  ...(r.hello && r.jwks ? { hello: r.hello.rps, jwks: r.jwks.rps } : {}),
  ...(r.half ? { halfP99: r.half.p99 } : {}),
});

async function measureMode(target: Target, peer: Peer, hello: string): Promise<ModeResult> {
  const plan = PLAN[target.mode];
  const label = MODE_LABELS[target.mode];
  const urls = target.urls.length === 1 ? (target.urls[0] as string) : target.urls;
  const base = target.urls[0] as string;
  const issuanceUrls = Array.isArray(urls)
    ? urls.map((u) => `${u}/api/v1/credentials`)
    : `${urls}/api/v1/credentials`;
  const jwksUrl = `${base}/v1/credentials/jwks`;
  const halfRate = (rps: number) =>
    paced({
      url: `${base}/api/v1/credentials`,
      ...target.issue,
      rate: Math.max(1, Math.round(rps / 2)),
      durationSeconds: DURATION,
      connections: CONNECTIONS,
    });
  // Embedded has no PostgreSQL or Redis: their CPU is not its cost.
  const storage = target.mode !== 'embedded';
  const loadIssuance = (seconds: number, connections = ISSUANCE_CONNECTIONS) =>
    profiled(
      target.procs,
      () => load(issuanceUrls, { ...target.issue, duration: seconds, connections }),
      seconds,
      storage,
    );
  const loadPeer = () =>
    profiled(
      [peer.proc],
      () =>
        load(peer.tokenUrl, { ...peer.request, duration: SLICE_SECONDS, connections: ISSUANCE_CONNECTIONS }),
      SLICE_SECONDS,
      false,
    );

  console.log(`${label}: warm-up (3 s each)…`);
  if (plan.jwks) await load(jwksUrl, { duration: 3 });
  await load(issuanceUrls, { duration: 3, ...target.issue, connections: ISSUANCE_CONNECTIONS });
  if (plan.half)
    await paced({
      url: `${base}/api/v1/credentials`,
      ...target.issue,
      rate: 1_000,
      durationSeconds: 2,
      connections: CONNECTIONS,
    });

  const rounds: Round[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // A second at rest before each round: how busy the machine is with nothing loaded, and how
    // much of that the mode's own processes take (timers, work left over from the last load);
    // the rest is whatever else runs on this shared VM.
    const rest0 = machineCpu();
    const procs0 = target.procs.reduce((sum, p) => sum + cpuMicros(p.child.pid), 0);
    await sleep(1_000);
    const rest1 = machineCpu();
    const procs1 = target.procs.reduce((sum, p) => sum + cpuMicros(p.child.pid), 0);
    const jiffies = Math.max(1, rest1.total - rest0.total);
    const round: Partial<Round> = {
      machine_busy_at_rest: +((rest1.busy - rest0.busy) / jiffies).toFixed(3),
      // µs of CPU over jiffies (10 ms each) of every core.
      mode_busy_at_rest: +((procs1 - procs0) / 10_000 / jiffies).toFixed(3),
    };
    if (plan.jwks) {
      // Hello and JWKS alternate, so that the VM's drift falls on both alike.
      const hellos: Load[] = [];
      const jwksSlices: Load[] = [];
      for (let i = 0; i < SLICES; i++) {
        hellos.push(await load(hello, { duration: SLICE_SECONDS }));
        jwksSlices.push(await load(jwksUrl, { duration: SLICE_SECONDS }));
      }
      round.hello = combine(hellos);
      round.jwks = combine(jwksSlices);
    }
    // The sign rate (one core, in this process, everything idle), the peer and issuance alternate;
    // the peer and issuance take turns at going first.
    const signs: number[] = [];
    const peers: Profiled[] = [];
    const issuances: Profiled[] = [];
    for (let i = 0; i < SLICES; i++) {
      await sleep(250);
      signs.push(signRate(500));
      if (i % 2 === 0) {
        peers.push(await loadPeer());
        issuances.push(await loadIssuance(SLICE_SECONDS));
      } else {
        issuances.push(await loadIssuance(SLICE_SECONDS));
        peers.push(await loadPeer());
      }
    }
    round.sign = Math.round(signs.reduce((sum, x) => sum + x, 0) / signs.length);
    round.peer = combineProfiled(peers);
    round.issuance = combineProfiled(issuances);
    if (plan.fewer) {
      // The same load from fewer connections, for comparison (see ISSUANCE_CONNECTIONS).
      round.fewer = await loadIssuance(Math.max(1, Math.round(DURATION / 2)), CONNECTIONS);
    }
    if (plan.half) round.half = await halfRate(round.issuance.rps);
    const done = round as Round;
    rounds.push(done);
    const parts = [
      `machine ${pct(done.machine_busy_at_rest)} busy at rest (the mode ${pct(done.mode_busy_at_rest)})`,
      `sign ${done.sign}/s`,
      ...(done.hello && done.jwks
        ? [
            `hello ${done.hello.rps}/s, JWKS ${done.jwks.rps}/s = ${ratio(done.jwks.rps, done.hello.rps).toFixed(2)}× hello`,
          ]
        : []),
      `peer ${done.peer.rps}/s (machine ${pct(done.peer.machine_busy)} busy)`,
      `issuance ${done.issuance.rps}/s = ${ratio(done.issuance.rps, done.peer.rps).toFixed(2)}× peer = ${ratio(done.issuance.rps, done.sign).toFixed(2)}× sign (machine ${pct(done.issuance.machine_busy)} busy)`,
      ...(done.fewer
        ? [
            `${CONNECTIONS} connections: ${done.fewer.rps}/s = ${ratio(done.fewer.rps, done.sign).toFixed(2)}× sign (${pct(done.fewer.machine_busy)} busy)`,
          ]
        : []),
      ...(done.half ? [`half-rate p99 ${done.half.p99} ms`] : []),
    ];
    console.log(`  ${label} round ${r + 1}: ${parts.join('; ')}`);
  }
  const summary = summarize(rounds.map(figures));
  const allIssuance = combineProfiled(rounds.map((r) => r.issuance));
  const result: ModeResult = {
    mode: target.mode,
    gateways: target.urls.length,
    rounds,
    summary,
    cpu_us_per_credential: allIssuance.cpu_us_per_request,
    machine_busy_issuance: allIssuance.machine_busy,
    machine_busy_peer: combineProfiled(rounds.map((r) => r.peer)).machine_busy,
    machine_busy_at_rest: +(
      rounds.reduce((sum, r) => sum + r.machine_busy_at_rest, 0) / rounds.length
    ).toFixed(3),
    mode_busy_at_rest: +(rounds.reduce((sum, r) => sum + r.mode_busy_at_rest, 0) / rounds.length).toFixed(3),
  };
  if (plan.storage && target.databaseUrl) {
    // What a credential costs Redis and PostgreSQL (docs/capacity.md), at half the median
    // rate: a steady load like the p99 goal's, counted by the servers themselves.
    const rate = Math.max(1, Math.round(summary.issuance_rps / 2));
    const costs = await measureStorageCosts(target.databaseUrl, REDIS_URL, () =>
      paced({
        url: `${base}/api/v1/credentials`,
        ...target.issue,
        rate,
        durationSeconds: DURATION,
        connections: CONNECTIONS,
      }),
    );
    result.storage = { at_rate_per_s: rate, ...costs };
  }
  return result;
}

function failures(result: ModeResult): boolean {
  return result.rounds.some((r) =>
    [r.peer, r.issuance, r.jwks, r.fewer, r.half].some((l) => l && (l.non2xx || l.errors)),
  );
}

/** The commit measured, and whether the apps or packages had uncommitted changes then. */
function codeVersion(): { commit: string; uncommitted_changes: boolean } {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  try {
    return {
      commit: git('rev-parse', '--short', 'HEAD'),
      uncommitted_changes: git('status', '--porcelain', '--', 'apps', 'packages') !== '',
    };
  } catch {
    return { commit: 'unknown', uncommitted_changes: true };
  }
}

function printReport(results: ModeResult[], peer: Peer): void {
  const cell = (value: string, width: number) => value.padStart(width);
  console.log('');
  console.log(
    `median of ${ROUNDS} round(s), each ratio taken within its round; issuance and the peer from ${ISSUANCE_CONNECTIONS} connections, hello and JWKS from ${CONNECTIONS}; gRPC links: ${GRPC_TLS ? 'mutual TLS' : 'plaintext'}`,
  );
  console.log(
    `peer: oidc-provider ${peer.version}, client_credentials, EdDSA JWT access tokens (${peer.sample.bytes} B, ${peer.sample.expires_in} s), resource indicator, one process`,
  );
  const row = (what: string, rate: number, toPeer: string, toSign: number, busy: number, rest: string) =>
    console.log(
      `${what.padEnd(34)}${cell(String(rate), 8)}${cell(toPeer, 8)}${cell(toSign.toFixed(2), 8)}${cell(pct(busy), 7)}  ${rest}`,
    );
  console.log(
    `${'what'.padEnd(34)}${cell('rate/s', 8)}${cell('× peer', 8)}${cell('× sign', 8)}${cell('busy', 7)}`,
  );
  for (const r of results) {
    const s = r.summary;
    const extra = [
      ...(s.jwks_ratio_to_hello === undefined ? [] : [`JWKS ${s.jwks_ratio_to_hello.toFixed(2)} × hello`]),
      ...(s.half_rate_p99_ms === undefined ? [] : [`half-rate p99 ${s.half_rate_p99_ms.toFixed(1)} ms`]),
    ];
    row(
      `${MODE_LABELS[r.mode]} issuance`,
      s.issuance_rps,
      s.issuance_ratio_to_peer.toFixed(2),
      s.issuance_ratio_to_sign,
      r.machine_busy_issuance,
      extra.join(', '),
    );
    row(
      `  peer, in the same rounds`,
      s.peer_rps,
      '1.00',
      s.peer_ratio_to_sign,
      r.machine_busy_peer,
      `sign ${s.sign_per_s}/s${s.hello_rps ? `, hello ${s.hello_rps}/s` : ''}`,
    );
  }
  console.log(
    `machine busy at rest (the second before each round, mean): ${results
      .map(
        (r) =>
          `${MODE_LABELS[r.mode]} ${pct(r.machine_busy_at_rest)} (the mode's processes ${pct(r.mode_busy_at_rest)})`,
      )
      .join(', ')}`,
  );
  if (results.some((r) => r.machine_busy_at_rest - r.mode_busy_at_rest > BUSY_AT_REST_WARNING))
    console.log(
      `  WARNING: above ${pct(BUSY_AT_REST_WARNING)} at rest besides the mode itself, something else was using this machine's cores: the rates are not those of a quiet machine (the ratios suffer less, not nothing)`,
    );
  for (const r of results) {
    console.log(
      `CPU per issued credential, ${MODE_LABELS[r.mode]} (µs): ${Object.entries(r.cpu_us_per_credential)
        .map(([name, us]) => `${name} ${us}`)
        .join(', ')}`,
    );
  }
  for (const r of results) {
    for (const round of r.rounds) {
      if (!round.half) continue;
      const h = round.half;
      console.log(
        `${MODE_LABELS[r.mode]} half rate, round ${r.rounds.indexOf(round) + 1}: ${h.rps}/s, p50 ${h.p50} ms, p90 ${h.p90} ms, p99 ${h.p99} ms, max ${h.max} ms (steady, open loop)${h.non2xx || h.errors ? ` (non-2xx ${h.non2xx}, errors ${h.errors})` : ''}`,
      );
    }
  }
  for (const r of results) {
    const storage = r.storage;
    if (!storage) continue;
    console.log(
      `per credential at ${storage.at_rate_per_s}/s, ${MODE_LABELS[r.mode]} (${storage.credentials} credentials): Redis ${storage.redis.commands_per_credential} commands ` +
        `(${Object.entries(storage.redis.top_commands_per_credential)
          .map(([name, n]) => `${name} ${n}`)
          .join(
            ', ',
          )}), ${storage.redis.net_input_bytes_per_credential} B in / ${storage.redis.net_output_bytes_per_credential} B out; ` +
        `PostgreSQL ${storage.postgres.transactions_per_credential} transactions, ${storage.postgres.rows_written_per_credential} rows written, ` +
        `${storage.postgres.wal_bytes_per_credential} B of WAL (${storage.postgres.wal_scope}), ${storage.postgres.credential_row_bytes} B per stored credential (table and indexes); ` +
        `commit latency p50 ${storage.postgres.commit_latency_ms.p50} ms, p99 ${storage.postgres.commit_latency_ms.p99} ms`,
    );
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const version = codeVersion();
  const procs: Proc[] = [];
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  const needsPostgres = MODES_RUN.some((m) => m !== 'embedded');
  if (needsPostgres) await admin.connect();
  const plansDir = mkdtempSync(join(tmpdir(), 'rp-bench-'));
  const plansFile = join(plansDir, 'plans.yaml');
  writeFileSync(plansFile, BENCH_PLANS);
  const tls = GRPC_TLS && needsPostgres ? SystemTls.create() : undefined;
  const results: ModeResult[] = [];
  let target: Target | undefined;
  const sink = process.env.BENCH_OTLP_SINK === '1' ? await startOtlpSink() : undefined;
  try {
    const helloPort = await freePort();
    procs.push(startProcess('bench-hello', 'tests/bench/hello-server.ts', { PORT: String(helloPort) }));
    const hello = `http://127.0.0.1:${helloPort}/`;
    await waitFor(async () => (await fetch(hello)).status === 200, 20_000, 'the hello server');
    const peer = await startPeer();
    procs.push(peer.proc);
    console.log(
      `peer: oidc-provider ${peer.version} answers a JWT access token signed with ${peer.sample.alg} that verifies against its JWKS (aud ${JSON.stringify(peer.sample.aud)}, scope ${JSON.stringify(peer.sample.scope)})`,
    );
    console.log(
      `measuring ${MODES_RUN.map((m) => MODE_LABELS[m]).join(', ')}: ${ROUNDS} round(s) each, slices of ${SLICE_SECONDS} s; code ${version.commit}${version.uncommitted_changes ? ' (with uncommitted changes in apps/ or packages/)' : ''}`,
    );
    console.log('warm-up of hello and the peer (3 s each)…');
    await load(hello, { duration: 3 });
    await load(peer.tokenUrl, { ...peer.request, duration: 3, connections: ISSUANCE_CONNECTIONS });

    for (const mode of MODES_RUN) {
      const t0 = Date.now();
      target =
        mode === 'embedded'
          ? await startEmbedded(plansFile)
          : await startDistributedMode(mode, plansFile, admin, tls);
      const result = await measureMode(target, peer, hello);
      if (RELAY_AUTH) {
        console.log(`${MODE_LABELS[mode]}: relay session decisions (POST /v1/relays/auth)…`);
        result.relay_auth = await measureRelayAuth(target, target.owner, {
          seconds: DURATION,
          connections: CONNECTIONS,
        });
        console.log(`${MODE_LABELS[mode]}: relay auth ${JSON.stringify(result.relay_auth)}`);
      }
      if (WEBHOOKS) {
        console.log(`${MODE_LABELS[mode]}: webhook deliveries (session events to a local receiver)…`);
        result.webhooks = await measureWebhooks(target, target.owner, {
          seconds: DURATION,
          connections: CONNECTIONS,
        });
        console.log(`${MODE_LABELS[mode]}: webhooks ${JSON.stringify(result.webhooks)}`);
      }
      await target.stop();
      target = undefined;
      results.push(result);
      console.log(`${MODE_LABELS[mode]}: done in ${Math.round((Date.now() - t0) / 1000)} s`);
    }

    printReport(results, peer);
    const verdicts = goals(Object.fromEntries(results.map((r) => [r.mode, r.summary])));
    console.log('');
    console.log('goals:');
    for (const g of verdicts) console.log(`  ${formatGoal(g)}`);
    console.log(`(run took ${Math.round((Date.now() - started) / 1000)} s)`);

    const out = {
      date: new Date().toISOString(),
      ...version,
      node: process.version,
      grpc_tls: GRPC_TLS,
      duration_seconds: DURATION,
      slice_seconds: SLICE_SECONDS,
      rounds: ROUNDS,
      connections: CONNECTIONS,
      issuance_connections: ISSUANCE_CONNECTIONS,
      peer: {
        software: `oidc-provider ${peer.version}`,
        grant: 'client_credentials',
        access_token: peer.sample,
      },
      modes: Object.fromEntries(
        results.map((r) => [
          r.mode,
          {
            gateways: r.gateways,
            summary: r.summary,
            cpu_us_per_credential: r.cpu_us_per_credential,
            machine_busy_issuance: r.machine_busy_issuance,
            machine_busy_peer: r.machine_busy_peer,
            machine_busy_at_rest: r.machine_busy_at_rest,
            mode_busy_at_rest: r.mode_busy_at_rest,
            rounds: r.rounds,
            ...(r.storage ? { per_credential: r.storage } : {}),
            ...(r.relay_auth ? { relay_auth: r.relay_auth } : {}),
            ...(r.webhooks ? { webhooks: r.webhooks } : {}),
          },
        ]),
      ),
      goals: verdicts,
      run_seconds: Math.round((Date.now() - started) / 1000),
      ...(otlpSink ? { otlp_sink: { exports: otlpSink.requests, bytes: otlpSink.bytes } } : {}),
    };
    if (otlpSink) {
      console.log(`OTLP sink: ${otlpSink.requests} export request(s), ${otlpSink.bytes} bytes received`);
    }
    const dir = join(ROOT, 'tests', 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(out, null, 2)}\n`);
    if (results.some(failures)) throw new Error('requests failed during the benchmark');
  } finally {
    await target?.stop().catch(() => {});
    await Promise.all(procs.map((p) => p.stop()));
    await sink?.close();
    tls?.destroy();
    rmSync(plansDir, { recursive: true, force: true });
    if (needsPostgres) await admin.end();
  }
}

// `ab.ts` imports the helpers above; only `node tests/bench/run.ts` runs the benchmark.
if (import.meta.main) await main();
