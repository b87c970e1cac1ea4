/**
 * Scans a test run's audit directory for secrets in clear (see
 * packages/testing/src/secrets-audit.ts for what counts). Exits 1 on any finding or when the
 * capture looks broken; `pnpm test` runs it after the tests.
 *
 * The audit trail gets a pass of its own (docs/audit.md): every `audit_events` row the database
 * dumps hold is scanned like any row (a token, a key, a password in clear) and, stricter, fails
 * when its details carry a field named like a secret (`password`, `token`, `key`, …) whatever
 * the value. A whole run must have dumped audit events (`--min-audit`, default 1; 0 when
 * `--min-db` is 0), so a capture that stopped reaching the audit table cannot pass.
 *
 *   node scripts/secrets-audit.ts [dir] [--min-logs N] [--min-processes N] [--min-db N] [--min-redis N] [--min-audit N]
 *
 * dir defaults to RELAYPLANE_TEST_AUDIT_DIR; the minimums to what a whole run leaves.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type AuditResult,
  audit,
  FULL_RUN_MINIMUMS,
  type Minimums,
  report,
  testPasswords,
} from '../packages/testing/src/secrets-audit.ts';

export function runAudit(argv: string[]): number {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'min-logs': { type: 'string' },
      'min-processes': { type: 'string' },
      'min-db': { type: 'string' },
      'min-redis': { type: 'string' },
      'min-audit': { type: 'string' },
    },
  });
  const dir = positionals[0] ?? process.env.RELAYPLANE_TEST_AUDIT_DIR;
  if (!dir) {
    console.log('secrets audit: no directory (pass it or set RELAYPLANE_TEST_AUDIT_DIR)');
    return 1;
  }
  const num = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number(v));
  const min: Minimums = {
    logs: num(values['min-logs'], FULL_RUN_MINIMUMS.logs),
    processes: num(values['min-processes'], FULL_RUN_MINIMUMS.processes),
    db: num(values['min-db'], FULL_RUN_MINIMUMS.db),
    redis: num(values['min-redis'], FULL_RUN_MINIMUMS.redis),
  };
  const result = audit(dir, testPasswords(join(import.meta.dirname, '..')), min);
  auditTrailPass(dir, result, num(values['min-audit'], min.db > 0 ? 1 : 0));
  return report(result) ? 0 : 1;
}

/** Details fields no audit event may have, whatever their value (docs/audit.md: never a secret). */
const SECRET_DETAIL =
  /^(password|new_password|current_password|secret|client_secret|token|key|value|code|user_code|device_code|private_key|kek|authorization|cookie|signature)$/i;

/**
 * The audit trail's own pass over the database dumps (`db/*.jsonl`, one row per line as
 * `{"table": "<schema>.<table>", "row": {...}}`): counts the `audit_events` rows and adds a
 * finding for each details field named like a secret. The generic scan has already looked at
 * the same rows for tokens, keys and passwords.
 */
export function auditTrailPass(dir: string, result: AuditResult, minRows: number): number {
  const dbDir = join(dir, 'db');
  let rows = 0;
  const files = existsSync(dbDir) ? readdirSync(dbDir).filter((f) => f.endsWith('.jsonl')) : [];
  for (const file of files) {
    const lines = readFileSync(join(dbDir, file), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (!line.includes('audit_events"')) return;
      const { table, row } = JSON.parse(line) as { table: string; row: { id?: string; details?: unknown } };
      if (!table.endsWith('.audit_events')) return;
      rows += 1;
      for (const path of secretFields(row.details, 'details')) {
        result.findings.push({
          file: `db/${file}`,
          line: i + 1,
          kind: 'audit event details field named like a secret',
          excerpt: `event ${row.id ?? '?'}: ${path}`,
        });
      }
    });
  }
  result.counts['audit events'] = rows;
  if (rows < minRows) {
    result.problems.push(
      `${rows} audit_events rows in the database dumps (at least ${minRows} expected): does the dump still reach admin's audit table?`,
    );
  }
  return rows;
}

function secretFields(value: unknown, path: string): string[] {
  if (value === null || typeof value !== 'object') return [];
  if (Array.isArray(value)) return value.flatMap((v, i) => secretFields(v, `${path}[${i}]`));
  return Object.entries(value).flatMap(([k, v]) => [
    ...(SECRET_DETAIL.test(k) ? [`${path}.${k}`] : []),
    ...secretFields(v, `${path}.${k}`),
  ]);
}

// Run as a script, not when scripts/test.ts imports it (import.meta.main needs Node 24.2).
if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  process.exit(runAudit(process.argv.slice(2)));
}
