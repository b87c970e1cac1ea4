import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { readYaml } from './support/chart.ts';
import { chartDir, deployDir } from './support/helm.ts';

const run = promisify(execFile);

const valuesPath = join(chartDir, 'values.yaml');
const readmePath = join(chartDir, 'README.md');
/** The real binary (pnpm's shell shim around the package's bin script). */
const generator = join(deployDir, 'node_modules/.bin/readme-generator');
const REGENERATE =
  'cd deploy && node_modules/.bin/readme-generator -v helm/relayplane/values.yaml -r helm/relayplane/README.md';

/** Dotted paths of the leaves of values.yaml (an empty map or any list is a leaf). */
function leafPaths(value: unknown, prefix = ''): string[] {
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length > 0) {
    return Object.entries(value).flatMap(([k, v]) => leafPaths(v, prefix ? `${prefix}.${k}` : k));
  }
  return [prefix];
}

/** First-column `code` of every row of the generated `## Parameters` tables. */
function parameterRows(readme: string): string[] {
  const section = readme.slice(readme.indexOf('\n## Parameters\n'));
  return [...section.matchAll(/^\|\s*`([^`]+)`\s*\|/gm)].map((m) => m[1] ?? '');
}

describe('chart README parameters table', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'relayplane-readme-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('is exactly what readme-generator produces from values.yaml (no drift)', async () => {
    const copy = join(tmp, 'README.md');
    copyFileSync(readmePath, copy);
    const { stdout } = await run(generator, ['-v', valuesPath, '-r', copy], {
      cwd: tmp,
      // The shim runs `node` from PATH: make that this Node.
      env: { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}` },
    }).catch((err: { stdout?: string; stderr?: string }) => {
      // The generator exits non-zero when a value has no `## @param` (or a @param names no value).
      throw new Error(
        `readme-generator rejected values.yaml: document every value with "## @param <path> <description>".\n${err.stdout ?? ''}${err.stderr ?? ''}`,
      );
    });
    // Strict: no value may escape the metadata check through a modifier or @skip.
    expect(stdout).toContain('INFO: Metadata is correct!');
    expect(stdout).not.toContain('Skipping check for');
    const committed = readFileSync(readmePath, 'utf8');
    const regenerated = readFileSync(copy, 'utf8');
    if (regenerated !== committed) {
      expect.fail(
        `deploy/helm/relayplane/README.md is out of date with values.yaml. Regenerate it with:\n  ${REGENERATE}\n`,
      );
    }
  });

  it('has one row per value of values.yaml and none for values that do not exist', () => {
    const readme = readFileSync(readmePath, 'utf8');
    const paths = leafPaths(readYaml(valuesPath));
    const rows = parameterRows(readme);
    expect(paths.length).toBeGreaterThan(100);
    expect(paths.filter((p) => !rows.includes(p))).toEqual([]);
    expect(rows.filter((r) => !paths.includes(r))).toEqual([]);
    expect(new Set(rows).size).toBe(rows.length);
  });

  it('has no `## @param` without a description', () => {
    const params = readFileSync(valuesPath, 'utf8').match(/^\s*## @param .*$/gm) ?? [];
    expect(params.length).toBeGreaterThan(100);
    expect(params.filter((line) => !/^\s*## @param \S+ \S.{8,}$/.test(line))).toEqual([]);
  });
});
