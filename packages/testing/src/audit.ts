/**
 * The secrets audit's capture side. When RELAYPLANE_TEST_AUDIT_DIR is set (the root `pnpm test`
 * sets it), test loggers, child processes and test databases/Redis prefixes also write their
 * raw output or rows into that directory, and scripts/secrets-audit.ts scans it after the run
 * for passwords, tokens, keys and codes in clear. Unset (a single-file dev run), nothing here
 * does anything.
 *
 * Layout: <dir>/<kind>/<name>-<pid>-<random>.<ext>, kind one of `logs` (test loggers),
 * `processes` (child processes' stdout/stderr), `db` (row dumps, plus a `.created` marker per
 * database so a database that was never dropped, hence never dumped, is noticed), `redis`.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const AUDIT_DIR_ENV = 'RELAYPLANE_TEST_AUDIT_DIR';

export type AuditKind = 'logs' | 'processes' | 'db' | 'redis';

export function auditDir(): string | undefined {
  const dir = process.env[AUDIT_DIR_ENV];
  return dir === undefined || dir === '' ? undefined : dir;
}

/** A path for a new audit file of `kind`, or undefined when the audit is off. */
export function auditPath(kind: AuditKind, name: string, ext: string): string | undefined {
  const dir = auditDir();
  if (!dir) return undefined;
  const sub = join(dir, kind);
  mkdirSync(sub, { recursive: true });
  const safe = name.replace(/[^a-zA-Z0-9._-]/g, '_').slice(0, 60) || 'unnamed';
  return join(sub, `${safe}-${process.pid}-${randomBytes(3).toString('hex')}.${ext}`);
}

export interface AuditSink {
  write(text: string | Uint8Array): void;
  close(): void;
}

/**
 * An append-only file of `kind`, written synchronously: test workers exit without flushing
 * streams, and a lost tail would be a gap in the audit. Undefined when the audit is off.
 */
export function auditSink(kind: AuditKind, name: string, ext = 'log'): AuditSink | undefined {
  const path = auditPath(kind, name, ext);
  if (!path) return undefined;
  let fd: number | undefined = openSync(path, 'a');
  return {
    write(text) {
      if (fd !== undefined) writeSync(fd, text);
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}

/** Copies a child's stdout and stderr, as they come, into a `processes` audit file. */
export function auditChildOutput(child: ChildProcess, name: string): void {
  const sink = auditSink('processes', name);
  if (!sink) return;
  child.stdout?.on('data', (chunk: Buffer) => sink.write(chunk));
  child.stderr?.on('data', (chunk: Buffer) => sink.write(chunk));
  child.once('close', () => sink.close());
}
