/** Starts apps as real child processes, the way an operator would, and stops them by PID. */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICES } from '@relayplane/contract/contract';
import { auditChildOutput } from '@relayplane/testing/audit';

export const ROOT = join(import.meta.dirname, '..', '..');
const NODE = process.execPath;
const LOG_DIR = join(ROOT, 'tests', '.logs');

export interface Proc {
  name: string;
  child: ChildProcess;
  output(): string;
  /** SIGTERM, then wait for the exit code. */
  stop(): Promise<number | null>;
  exited: Promise<number | null>;
}

export function startProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  options: {
    /** Add to the log of an earlier process of that name (a restart) instead of replacing it. */
    appendLog?: boolean;
    /** The checkout whose `script` runs (default: this one), e.g. a baseline's in an A/B benchmark. */
    root?: string;
  } = {},
): Proc {
  const root = options.root ?? ROOT;
  mkdirSync(LOG_DIR, { recursive: true });
  const log = createWriteStream(join(LOG_DIR, `${name}.log`), { flags: options.appendLog ? 'a' : 'w' });
  const child = spawn(NODE, [join(root, script)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  auditChildOutput(child, name);
  let out = '';
  const collect = (chunk: Buffer) => {
    out += chunk.toString();
    log.write(chunk);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    child,
    output: () => out,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      log.end();
      return code;
    },
  };
}

export function runToCompletion(
  script: string,
  env: Record<string, string>,
  root = ROOT,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(NODE, [join(root, script)], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    auditChildOutput(child, script);
    let output = '';
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/** What every process of a distributed system is started with (shared PostgreSQL and Redis). */
export interface SystemOptions {
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  kek: string;
  bootstrap: { email: string; password: string };
  logLevel?: string;
  /** More variables for every process (e.g. RELAYPLANE_PLANS_FILE). */
  extraEnv?: Record<string, string>;
  /** The checkout whose apps run (default: this one). */
  root?: string;
}

/** The environment of every app, with billing and admin on the given ports, as the chart wires them. */
export function systemEnv(
  o: SystemOptions,
  ports: { billing: number; admin: number },
): Record<string, string> {
  return {
    LOG_LEVEL: o.logLevel ?? 'info',
    DATABASE_URL: o.databaseUrl,
    REDIS_URL: o.redisUrl,
    RELAYPLANE_REDIS_PREFIX: o.redisPrefix,
    RELAYPLANE_KEK: o.kek,
    RELAYPLANE_BOOTSTRAP_EMAIL: o.bootstrap.email,
    RELAYPLANE_BOOTSTRAP_PASSWORD: o.bootstrap.password,
    BILLING_LISTEN_ADDRESS: `127.0.0.1:${ports.billing}`,
    ADMIN_LISTEN_ADDRESS: `127.0.0.1:${ports.admin}`,
    ADMIN_BILLING_ADDRESS: `127.0.0.1:${ports.billing}`,
    GATEWAY_ADMIN_ADDRESS: `127.0.0.1:${ports.admin}`,
    GATEWAY_BILLING_ADDRESS: `127.0.0.1:${ports.billing}`,
    // Where issuer and billing deliver their audit outboxes.
    ISSUER_ADMIN_ADDRESS: `127.0.0.1:${ports.admin}`,
    BILLING_ADMIN_ADDRESS: `127.0.0.1:${ports.admin}`,
    HOST: '127.0.0.1',
    ...o.extraEnv,
  };
}

/** The migrate commands of the services that own a schema, as an operator runs them before a rollout. */
export async function migrateAll(env: Record<string, string>, root = ROOT): Promise<void> {
  for (const app of [SERVICES.billing, SERVICES.admin, SERVICES.issuer]) {
    const { code, output } = await runToCompletion(`apps/${app}/src/migrate.ts`, env, root);
    if (code !== 0) throw new Error(`${app} migrate exited ${code}:\n${output}`);
  }
}
