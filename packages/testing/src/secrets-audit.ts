/**
 * The secrets audit's scanner (scripts/secrets-audit.ts runs it): after `pnpm test`, nothing
 * a test run logged or left in a database or Redis may hold a password, token, key or code in
 * clear. It scans every file of the audit directory (filled by ./audit.ts) and fails on any
 * finding, and also when the directory is missing, thinner than the run should have made it,
 * or holds a database that was created but never dumped — a broken capture must not pass.
 *
 * What counts as a secret in clear:
 * - a bearer token `parseToken` accepts (prefix, 64 hex, good CRC-32): only real tokens carry
 *   a valid checksum, so a SHA-256 (bare 64 hex) or a mangled token is not one;
 * - an API key `svc_live_`/`svc_test_` + 64 hex;
 * - a signed JWT (relay credentials): handed to clients, never logged, never stored (the
 *   issuer keeps the jti only);
 * - a device-flow user code `XXXX-XXXX` (consonants); device codes are 43 random base64url
 *   characters with no prefix (a JWK thumbprint looks the same), so they are found by their
 *   field name and verbatim (both below);
 * - a private key: PEM, or a JWK's private member `"d"`;
 * - any JSON field named like a credential (`password`, `token`, `device_code`,
 *   `authorization`, …) whose value is not censored (see `censored`);
 * - any password the test sources use (string literals assigned to something named
 *   `*password*`, read from the test files at every run so the list never goes stale);
 * - verbatim, any secret a test sent or received through the e2e API client (device codes,
 *   generated passwords, tokens, keys: `known-secrets/`, written by auditSecretsIn).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { CHECKPOINT_JWS_TYPE } from '@relayplane/contract/audit-checkpoint';
import { parseToken } from '@relayplane/contract/tokens';

export interface Finding {
  file: string;
  line: number;
  kind: string;
  excerpt: string;
}

interface Match {
  start: number;
  end: number;
  kind: string;
}

const TOKEN = /rp[uibcrm]_[0-9a-f]{72}/g;
const API_KEY = /svc_(?:live|test)_[0-9a-f]{64}/g;
const JWT = /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}/g;
// Delimited on both sides so the pattern inside a longer base64 run does not count.
const USER_CODE = /(?<![A-Za-z0-9_-])[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}(?![A-Za-z0-9_-])/g;
const PEM_PRIVATE_KEY = /-----BEGIN [A-Z ]*PRIVATE KEY-----/g;
const JWK_PRIVATE = /\\?"d\\?"\s*:\s*\\?"[A-Za-z0-9_-]{32,}/g;
/** JSON fields (also JSON inside a JSON string, quotes escaped) that only a credential fills. */
const SECRET_FIELD =
  /\\?"(password|newPassword|currentPassword|token|accessToken|access_token|refreshToken|refresh_token|idToken|id_token|deviceCode|device_code|userCode|user_code|apiKey|api_key|secret|clientSecret|client_secret|authorization|cookie|kek)\\?"\s*:\s*\\?"((?:[^"\\]|\\[^"])*)\\?"/g;
/**
 * What a field named like a credential may show: the logger's censor, a `<placeholder>` (the
 * embedded banner's curl example), or fewer than 8 characters — no credential we hand out or
 * accept is that short, and a regex in a printed shell snippet (`"token":"([^"]+)"`) is.
 */
function censored(value: string): boolean {
  return value === '[redacted]' || /^<[^<>]*>$/.test(value) || value.length < 8;
}

/**
 * A signed audit checkpoint (docs/audit.md, "Signed checkpoints"): a JWS a tenant is meant to
 * save and share, over a chain head, opening nothing. Not a credential.
 */
function isAuditCheckpoint(jws: string): boolean {
  try {
    const header = JSON.parse(Buffer.from(jws.split('.')[0] ?? '', 'base64url').toString('utf8')) as {
      typ?: unknown;
    };
    return header.typ === CHECKPOINT_JWS_TYPE;
  } catch {
    return false;
  }
}

/** A secret known by value: a test password, or one a test saw in API traffic. */
export interface Literal {
  value: string;
  kind: string;
}

export function passwordLiterals(passwords: readonly string[]): Literal[] {
  return passwords.map((value) => ({ value, kind: 'test password' }));
}

/** Every secret in `line`, by position. */
export function findInLine(line: string, literals: readonly Literal[]): Match[] {
  const out: Match[] = [];
  const add = (re: RegExp, kind: string, keep: (m: RegExpExecArray) => boolean = () => true) => {
    for (const m of line.matchAll(re)) {
      if (keep(m)) out.push({ start: m.index, end: m.index + m[0].length, kind });
    }
  };
  add(TOKEN, 'token', (m) => parseToken(m[0]) !== undefined);
  add(API_KEY, 'api key');
  add(JWT, 'jwt', (m) => !isAuditCheckpoint(m[0]));
  // `XXXX-XXXX` is how docs and test names spell the format, not a code.
  add(USER_CODE, 'user code', (m) => !/^(.)\1{3}-\1{4}$/.test(m[0]));
  add(PEM_PRIVATE_KEY, 'private key');
  add(JWK_PRIVATE, 'private key (JWK "d")');
  add(SECRET_FIELD, 'credential field', (m) => !censored(m[2] ?? ''));
  for (const { value, kind } of literals) {
    let at = line.indexOf(value);
    while (at !== -1) {
      out.push({ start: at, end: at + value.length, kind });
      at = line.indexOf(value, at + value.length);
    }
  }
  return out.sort((a, b) => a.start - b.start);
}

/** `line` around `match`, every secret in it replaced by its kind and first characters. */
export function redactedExcerpt(line: string, matches: readonly Match[], match: Match): string {
  const from = Math.max(0, match.start - 60);
  const to = Math.min(line.length, match.end + 60);
  let out = '';
  let at = from;
  for (const m of matches) {
    if (m.end <= from || m.start >= to || m.start < at) continue;
    out += line.slice(at, m.start);
    const secret = line.slice(m.start, m.end);
    // A type prefix says which secret leaked and nothing of it; any other start stays hidden.
    const prefix = /^(rp[uibcrm]_|svc_|eyJ|-----)/.exec(secret)?.[1] ?? '';
    out += `<${m.kind}: ${prefix}… ${secret.length} chars>`;
    at = m.end;
  }
  out += line.slice(at, to);
  return `${from > 0 ? '…' : ''}${out}${to < line.length ? '…' : ''}`;
}

export function scanText(file: string, text: string, literals: readonly Literal[]): Finding[] {
  const findings: Finding[] = [];
  // Most known values are in no file: look for them in the file once, not on every line.
  const present = literals.filter((l) => text.includes(l.value));
  text.split('\n').forEach((line, i) => {
    const matches = findInLine(line, present);
    for (const m of matches) {
      findings.push({ file, line: i + 1, kind: m.kind, excerpt: redactedExcerpt(line, matches, m) });
    }
  });
  return findings;
}

const TEST_FILE = /(\.test\.ts|\/tests\/.*\.ts)$/;
const PASSWORD_LITERAL = /\w*password\w*['"]?\s*[:=]\s*(['"`])([^'"`\n$]{8,})\1/gi;

function walk(dir: string, keep: (path: string) => boolean, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'gen' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, keep, out);
    else if (keep(path)) out.push(path);
  }
  return out;
}

/**
 * The passwords the test sources use: literals assigned to a `*password*` name, at least
 * 8 characters. A phrase that also occurs in application source ("wrong password" in a
 * comment or a message) is left out: finding it in a log would prove nothing.
 */
export function testPasswords(root: string): string[] {
  const sources = ['apps', 'packages', 'tests']
    .map((d) => join(root, d))
    .filter(existsSync)
    .flatMap((d) => walk(d, (p) => p.endsWith('.ts')));
  const found = new Set<string>();
  const appText: string[] = [];
  for (const file of sources) {
    const text = readFileSync(file, 'utf8');
    if (!TEST_FILE.test(relative(root, file).replaceAll('\\', '/'))) {
      appText.push(text);
      continue;
    }
    for (const m of text.matchAll(PASSWORD_LITERAL)) found.add(m[2] as string);
  }
  const app = appText.join('\n');
  return [...found].filter((p) => !app.includes(p)).sort();
}

export interface AuditResult {
  files: number;
  bytes: number;
  findings: Finding[];
  /** Why the capture cannot be trusted; empty when it can. */
  problems: string[];
  /** Files with content per kind (`logs`, `processes`, `db`, `redis`, `run`). */
  counts: Record<string, number>;
  /** How many secrets seen in API traffic were looked for verbatim. */
  knownSecrets: number;
}

export interface Minimums {
  logs: number;
  processes: number;
  db: number;
  redis: number;
}

/** The secrets tests saw in API traffic (`known-secrets/`, see auditSecretsIn). */
function knownSecrets(dir: string): Literal[] {
  const sub = join(dir, KNOWN_SECRETS);
  if (!existsSync(sub)) return [];
  const byValue = new Map<string, Literal>();
  for (const file of walk(sub, () => true)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line === '') continue;
      const { field, value } = JSON.parse(line) as { field: string; value: string };
      byValue.set(value, { value, kind: `secret seen in API traffic (${field})` });
    }
  }
  return [...byValue.values()];
}

const KNOWN_SECRETS = 'known-secrets';

export function audit(dir: string, passwords: readonly string[], min: Minimums): AuditResult {
  const result: AuditResult = { files: 0, bytes: 0, findings: [], problems: [], counts: {}, knownSecrets: 0 };
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    result.problems.push(`audit directory ${dir} does not exist: the run captured nothing`);
    return result;
  }
  const literals = [...passwordLiterals(passwords), ...knownSecrets(dir)];
  result.knownSecrets = literals.length - passwords.length;
  const files = walk(dir, () => true);
  const created = new Set<string>();
  const dumped = new Set<string>();
  // <kind>/<name>-<pid>-<random>.<ext>
  const dbName = (path: string) =>
    /^(.*)-\d+-[0-9a-f]{6}\.[a-z]+$/.exec(path.split(/[\\/]/).pop() ?? '')?.[1];
  for (const file of files) {
    const rel = relative(dir, file).replaceAll('\\', '/');
    const kind = rel.includes('/') ? (rel.split('/')[0] as string) : 'other';
    if (kind === KNOWN_SECRETS) continue;
    if (kind === 'db' && file.endsWith('.created')) {
      created.add(dbName(file) ?? rel);
      continue;
    }
    if (kind === 'db') dumped.add(dbName(file) ?? rel);
    const text = readFileSync(file, 'utf8');
    // A logger or a dump that wrote nothing proves no capture: only files with content count.
    if (text !== '' || kind === 'db') result.counts[kind] = (result.counts[kind] ?? 0) + 1;
    result.files += 1;
    result.bytes += Buffer.byteLength(text);
    result.findings.push(...scanText(rel, text, literals));
  }
  for (const [kind, n] of Object.entries(min)) {
    const have = result.counts[kind] ?? 0;
    if (have < n) {
      result.problems.push(
        `${have} ${kind} files (at least ${n} expected): is the ${kind} capture of @relayplane/testing/audit broken?`,
      );
    }
  }
  const undumped = [...created].filter((name) => !dumped.has(name)).sort();
  if (undumped.length > 0) {
    result.problems.push(
      `${undumped.length} test databases were created but never dumped (their drop() never ran): ${undumped.join(', ')}`,
    );
  }
  return result;
}

const MAX_PRINTED = 100;

export function report(result: AuditResult, print: (line: string) => void = console.log): boolean {
  for (const f of result.findings.slice(0, MAX_PRINTED)) {
    print(`${f.file}:${f.line}: ${f.kind}: ${f.excerpt}`);
  }
  if (result.findings.length > MAX_PRINTED) print(`… and ${result.findings.length - MAX_PRINTED} more`);
  for (const p of result.problems) print(`audit incomplete: ${p}`);
  const counts = Object.entries(result.counts)
    .sort()
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  print(
    `secrets audit: ${result.files} files (${counts || 'none'}), ${result.bytes} bytes scanned, ${result.knownSecrets} secrets from API traffic looked for, ${result.findings.length} findings`,
  );
  return result.findings.length === 0 && result.problems.length === 0;
}

/** What a whole `pnpm test` run leaves at the least; far below what it does leave. */
export const FULL_RUN_MINIMUMS: Minimums = { logs: 20, processes: 5, db: 20, redis: 5 };
