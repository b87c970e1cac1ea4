/**
 * Scans a test run's audit directory for secrets in clear (see
 * packages/testing/src/secrets-audit.ts for what counts). Exits 1 on any finding or when the
 * capture looks broken; `pnpm test` runs it after the tests.
 *
 *   node scripts/secrets-audit.ts [dir] [--min-logs N] [--min-processes N] [--min-db N] [--min-redis N]
 *
 * dir defaults to RELAYPLANE_TEST_AUDIT_DIR; the minimums to what a whole run leaves.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
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
  return report(audit(dir, testPasswords(join(import.meta.dirname, '..')), min)) ? 0 : 1;
}

// Run as a script, not when scripts/test.ts imports it (import.meta.main needs Node 24.2).
if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  process.exit(runAudit(process.argv.slice(2)));
}
