/**
 * The secrets audit's capture side. When RELAYPLANE_TEST_AUDIT_DIR is set (the root `pnpm test`
 * sets it), test loggers, child processes and test databases/Redis prefixes also write their
 * raw output or rows into that directory, and scripts/secrets-audit.ts scans it after the run
 * for passwords, tokens, keys and codes in clear. Unset (a single-file dev run), nothing here
 * does anything.
 *
 * Layout: <dir>/<kind>/<name>-<pid>-<random>.<ext>, kind one of `logs` (test loggers),
 * `processes` (child processes' stdout/stderr), `db` (row dumps, plus a `.created` marker per
 * database so a database that was never dropped, hence never dumped, is noticed), `redis`,
 * and `known-secrets` (secrets tests saw in API traffic, to look for verbatim; not scanned).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const AUDIT_DIR_ENV = 'RELAYPLANE_TEST_AUDIT_DIR';

export type AuditKind = 'logs' | 'processes' | 'db' | 'redis' | 'known-secrets';

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
      if (fd === undefined) return;
      if (typeof text === 'string') writeSync(fd, text);
      else writeSync(fd, text);
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

/**
 * Shorter values are left to the scanner's patterns: a test's `password: 'password'` looked
 * for verbatim would match every log line about passwords. (User codes, 9 characters, have
 * their own pattern.)
 */
const KNOWN_SECRET_MIN_LENGTH = 10;
/** Fields whose string values, seen by a test in a request or response, are secrets. */
const SECRET_KEYS =
  /^(password|new_?password|current_?password|token|access_?token|refresh_?token|device_?code|user_?code|key|api_?key|secret|credential|jwt|mfa_?token|device_?token|otpauth_?uri|recovery_?codes|code|mfa_?code)$/i;

/**
 * Records every credential-named string in `value` (a request or response body a test
 * handled) as a known secret: the scanner then looks for each, verbatim, in everything the
 * run logged or stored. This is what finds secrets without a recognisable shape (device codes,
 * generated passwords). They are kept in `known-secrets/`, which the scanner does not scan.
 */
export function auditSecretsIn(value: unknown): void {
  const dir = auditDir();
  if (!dir) return;
  const found: { field: string; value: string }[] = [];
  const visit = (v: unknown, depth: number) => {
    if (depth > 8 || v === null || typeof v !== 'object') return;
    for (const [field, inner] of Object.entries(v)) {
      if (typeof inner === 'string' && inner.length >= KNOWN_SECRET_MIN_LENGTH && SECRET_KEYS.test(field))
        found.push({ field, value: inner });
      else if (Array.isArray(inner) && SECRET_KEYS.test(field)) {
        // A list of secrets (recovery codes): each is one.
        for (const item of inner) {
          if (typeof item === 'string' && item.length >= KNOWN_SECRET_MIN_LENGTH)
            found.push({ field, value: item });
        }
      } else visit(inner, depth + 1);
    }
  };
  visit(value, 0);
  if (found.length === 0) return;
  if (knownSecrets?.dir !== dir) knownSecrets = { dir, sink: auditSink('known-secrets', 'seen', 'jsonl') };
  for (const f of found) knownSecrets.sink?.write(`${JSON.stringify(f)}\n`);
}

/** One file per test worker and directory, left open (writes are synchronous: nothing to flush). */
let knownSecrets: { dir: string; sink: AuditSink | undefined } | undefined;
