/**
 * Runs bundles as child processes and talks to them: the gRPC health check (the workspace's
 * own client), HTTP, and a throwaway PostgreSQL database and Redis prefix per test run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { HealthService, ServingStatus } from '../../../packages/shared/src/health.ts';
import { connect } from '../../../packages/shared/src/rpc.ts';
import { repoRoot } from './bundle-build.ts';

export { ServingStatus };

export interface BundleProcess {
  name: string;
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  /** SIGTERM, SIGKILL after 15 s; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export function startBundle(
  name: string,
  cwd: string,
  argv: readonly string[],
  env: Record<string, string>,
): BundleProcess {
  const [command, ...args] = argv;
  if (!command) throw new Error(`${name}: empty command`);
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const collect = (chunk: Buffer) => {
    out += chunk.toString();
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => {
    child.once('error', (err) => {
      out += `\nspawn failed: ${err.message}`;
      resolve(null);
    });
    child.once('exit', (code) => resolve(code));
  });
  return {
    name,
    child,
    output: () => out,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** A port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/**
 * Polls `check` until it returns true; fails early when `proc` exits, or after `timeoutMs`.
 * Returns the milliseconds it took.
 */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  options: { timeoutMs: number; proc?: BundleProcess },
): Promise<number> {
  const start = Date.now();
  let exitCode: number | null | undefined;
  void options.proc?.exited.then((code) => {
    exitCode = code;
  });
  for (;;) {
    if (await check().catch(() => false)) return Date.now() - start;
    if (exitCode !== undefined) {
      throw new Error(`${what}: the process exited (${exitCode}) first:\n${options.proc?.output()}`);
    }
    if (Date.now() - start > options.timeoutMs) {
      throw new Error(
        `timed out after ${options.timeoutMs} ms waiting for ${what}:\n${options.proc?.output() ?? ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The standard gRPC health Check of `service` ('' is the whole server). */
export async function grpcHealth(address: string, service: string): Promise<ServingStatus> {
  const client = connect(HealthService, address, { timeoutMs: 1_000 });
  try {
    return (await client.check({ service })).status;
  } finally {
    client.close();
  }
}

// The deploy package has no database or Redis client of its own; borrow the ones the
// workspace's test helpers (@relayplane/testing) depend on.
const requireFromTesting = createRequire(join(repoRoot, 'packages/testing/package.json'));

interface PgClient {
  connect(): Promise<void>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
}
interface RedisClient {
  scan(cursor: string, ...args: (string | number)[]): Promise<[string, string[]]>;
  del(...keys: string[]): Promise<number>;
  disconnect(): void;
}

async function withPg(url: string, run: (client: PgClient) => Promise<void>): Promise<void> {
  const pg = requireFromTesting('pg') as { Client: new (o: { connectionString: string }) => PgClient };
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await run(client);
  } finally {
    await client.end();
  }
}

export interface Scratch {
  /** URL of a fresh database made for this run. */
  databaseUrl: string;
  redisUrl: string;
  /** Redis key prefix unique to this run. */
  redisPrefix: string;
  /** Drops the database and deletes the prefix's keys. */
  dispose(): Promise<void>;
}

export async function createScratch(baseDatabaseUrl: string, redisUrl: string): Promise<Scratch> {
  const id = randomBytes(4).toString('hex');
  const name = `rp_bundles_${id}`;
  await withPg(baseDatabaseUrl, (c) => c.query(`create database "${name}"`).then(() => undefined));
  const url = new URL(baseDatabaseUrl);
  url.pathname = `/${name}`;
  const redisPrefix = `t:bundles_${id}:`;
  return {
    databaseUrl: url.toString(),
    redisUrl,
    redisPrefix,
    async dispose() {
      await withPg(baseDatabaseUrl, (c) =>
        c.query(`drop database if exists "${name}" with (force)`).then(() => undefined),
      );
      const { Redis } = requireFromTesting('ioredis') as { Redis: new (url: string) => RedisClient };
      const redis = new Redis(redisUrl);
      try {
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
          cursor = next;
          if (keys.length) await redis.del(...keys);
        } while (cursor !== '0');
      } finally {
        redis.disconnect();
      }
    },
  };
}
