/** Starts apps as real child processes, the way an operator would, and stops them by PID. */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
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

export function startProcess(name: string, script: string, env: Record<string, string>): Proc {
  mkdirSync(LOG_DIR, { recursive: true });
  const log = createWriteStream(join(LOG_DIR, `${name}.log`));
  const child = spawn(NODE, [join(ROOT, script)], {
    cwd: ROOT,
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
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(NODE, [join(ROOT, script)], {
      cwd: ROOT,
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
