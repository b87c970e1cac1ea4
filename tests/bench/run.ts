/**
 * `pnpm bench`: boots the distributed mode on 127.0.0.1 (PostgreSQL + Redis), warms up, loads
 * hot paths with autocannon and prints every figure next to a baseline measured in the same run:
 * raw Ed25519 signing with node:crypto (one core) and a Fastify hello-world (same connections).
 * Results also go to tests/bench/results/latest.json. Everything stops itself.
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { startDistributed } from '../support/distributed.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, ROOT, startProcess } from '../support/processes.ts';

const DATABASE_URL =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DURATION = Number(process.env.BENCH_DURATION_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);

interface Load {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function load(url: string, duration = DURATION, headers: Record<string, string> = {}): Promise<Load> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration, headers });
  return {
    rps: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
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

async function main(): Promise<void> {
  const procs: Proc[] = [];
  const dbName = `rp_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  await admin.query(`create database "${dbName}"`);
  const dbUrl = new URL(DATABASE_URL);
  dbUrl.pathname = `/${dbName}`;
  try {
    console.log(`Ed25519 sign rate (node:crypto, 1 core, 2 s)…`);
    const sign1 = signRate(2_000);

    const system = await startDistributed({
      label: 'bench',
      databaseUrl: dbUrl.toString(),
      redisUrl: REDIS_URL,
      redisPrefix: `bench:${dbName}:`,
      kek: randomBytes(32).toString('base64'),
      bootstrap: { email: 'bench@example.test', password: randomBytes(18).toString('base64url') },
      logLevel: 'warn',
    });
    procs.push(...system.procs);
    const base = system.baseUrl;
    const helloPort = await freePort();
    procs.push(startProcess('bench-hello', 'tests/bench/hello-server.ts', { PORT: String(helloPort) }));
    const hello = `http://127.0.0.1:${helloPort}/`;
    await waitFor(async () => (await fetch(hello)).status === 200, 20_000, 'the hello server');

    console.log(`warm-up (2 s each)…`);
    await load(hello, 2);
    await load(`${base}/v1/credentials/jwks`, 2);
    await load(`${base}/v1/plans`, 2);

    console.log(`measuring (${DURATION} s each, ${CONNECTIONS} connections)…`);
    const helloRun = await load(hello);
    const jwks = await load(`${base}/v1/credentials/jwks`);
    const plans = await load(`${base}/v1/plans`);

    const results = {
      date: new Date().toISOString(),
      node: process.version,
      duration_seconds: DURATION,
      connections: CONNECTIONS,
      baseline: { ed25519_sign_per_s_1_core: sign1, fastify_hello: helloRun },
      jwks: { ...jwks, ratio_to_hello: +(jwks.rps / helloRun.rps).toFixed(3) },
      plans_one_grpc_hop: { ...plans, ratio_to_hello: +(plans.rps / helloRun.rps).toFixed(3) },
    };
    const row = (name: string, l: Load, ratio?: number) =>
      `${name.padEnd(34)} ${String(l.rps).padStart(8)} req/s  p50 ${String(l.p50).padStart(4)} ms  p99 ${String(l.p99).padStart(4)} ms${ratio === undefined ? '' : `  ${ratio.toFixed(2)}× hello`}${l.non2xx || l.errors ? `  (non-2xx ${l.non2xx}, errors ${l.errors})` : ''}`;
    console.log('');
    console.log(`${'Ed25519 sign, node:crypto, 1 core'.padEnd(34)} ${String(sign1).padStart(8)} sig/s`);
    console.log(row('Fastify hello-world (baseline)', helloRun));
    console.log(row('GET /v1/credentials/jwks', jwks, results.jwks.ratio_to_hello));
    console.log(row('GET /v1/plans (1 gRPC hop)', plans, results.plans_one_grpc_hop.ratio_to_hello));
    const dir = join(ROOT, 'tests', 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    if (jwks.non2xx || jwks.errors || plans.non2xx || plans.errors) {
      throw new Error('requests failed during the benchmark');
    }
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    await admin.query(`drop database if exists "${dbName}" with (force)`);
    await admin.end();
  }
}

await main();
