/**
 * Adds up the vitest JSON reports of every package: total passed/failed/skipped, and how many
 * tests ran against the real PostgreSQL/Redis (files that use @relayplane/testing/storage or
 * boot services on them). Fails when a report is missing or anything was skipped.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

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
  testResults: {
    name: string;
    message?: string;
    assertionResults: { status: string; fullName: string; failureMessages?: string[] }[];
  }[];
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
// Printed last, so that the tail of a CI log (often all that is kept) names what failed.
const failures: string[] = [];
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
    const testFile = relative(root, result.name);
    if (result.message && !result.assertionResults.some((a) => a.status === 'failed')) {
      failures.push(`${testFile}: ${firstLine(result.message)}`);
    }
    for (const a of result.assertionResults) {
      if (a.status === 'failed')
        failures.push(`${testFile} > ${a.fullName}: ${firstLine(a.failureMessages?.[0] ?? '')}`);
    }
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
if (failures.length > 0) {
  console.log(`failed:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
}
console.log(`${passed} passed, ${failed} failed`);

function firstLine(text: string): string {
  const line =
    stripVTControlCharacters(text)
      .split('\n')
      .find((l) => l.trim() !== '') ?? '';
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

process.exit(ok && failed === 0 && passed > 0 ? 0 : 1);
