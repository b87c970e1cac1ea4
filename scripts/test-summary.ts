/**
 * Adds up the vitest JSON reports of every package: total passed/failed/skipped, and how many
 * tests ran against the real PostgreSQL/Redis (files that use @relayplane/testing/storage or
 * boot services on them). Fails when a report is missing or anything was skipped.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
// Every workspace package with a vitest config.
const packages = ['apps', 'packages']
  .flatMap((dir) => readdirSync(join(root, dir)).map((name) => `${dir}/${name}`))
  .concat(['tests', 'deploy'])
  .filter((pkg) => existsSync(join(root, pkg, 'vitest.config.ts')))
  .sort();

interface Report {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: { name: string; assertionResults: { status: string }[] }[];
}

const STORAGE_MARKERS = [
  '@relayplane/testing/storage',
  'startStack(',
  'startAdminRig(',
  'createTestDatabase',
  'createTestRedis',
];
let passed = 0;
let failed = 0;
let skipped = 0;
let storage = 0;
let ok = true;
for (const pkg of packages) {
  const file = join(root, pkg, '.vitest-report.json');
  if (!existsSync(file)) {
    if (existsSync(join(root, pkg, 'vitest.config.ts'))) {
      console.log(`${pkg}: no test report (did its tests run?)`);
      ok = false;
    }
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8')) as Report;
  let pkgStorage = 0;
  for (const result of report.testResults) {
    const source = existsSync(result.name) ? readFileSync(result.name, 'utf8') : '';
    if (STORAGE_MARKERS.some((m) => source.includes(m))) {
      pkgStorage += result.assertionResults.filter((a) => a.status === 'passed').length;
    }
  }
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + report.numTodoTests;
  storage += pkgStorage;
  console.log(
    `${relative(root, join(root, pkg)).padEnd(16)} ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests} skipped (${pkgStorage} against PostgreSQL/Redis)`,
  );
}
console.log(`tests that ran against the real PostgreSQL and Redis: ${storage}`);
if (skipped > 0) {
  console.log(`${skipped} tests were skipped: CI does not allow that`);
  ok = false;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(ok && failed === 0 && passed > 0 ? 0 : 1);
