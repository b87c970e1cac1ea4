import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readYaml } from './support/chart.ts';
import { chartDir } from './support/helm.ts';

const COMPONENTS = ['gateway', 'issuer', 'admin', 'billing'];

function leafPaths(value: unknown, prefix = ''): string[] {
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length > 0) {
    return Object.entries(value).flatMap(([k, v]) => leafPaths(v, prefix ? `${prefix}.${k}` : k));
  }
  return [prefix];
}

/** `a.b.c` is documented by a README table row naming it or one of its ancestors. */
function documented(readme: string, path: string): boolean {
  const parts = path.split('.');
  const candidates: string[] = [];
  for (let i = parts.length; i > 0; i--) {
    const p = parts.slice(0, i).join('.');
    candidates.push(p);
    if (COMPONENTS.includes(parts[0] ?? ''))
      candidates.push(`<component>${p.slice((parts[0] ?? '').length)}`);
  }
  const rows = new Set(documentedRows(readme));
  return candidates.some((c) => rows.has(c));
}

/** First-column `code` of every Markdown table row. */
function documentedRows(readme: string): string[] {
  return [...readme.matchAll(/^\|\s*`([^`]+)`\s*\|/gm)].map((m) => m[1] ?? '');
}

describe('chart README', () => {
  const readme = readFileSync(join(chartDir, 'README.md'), 'utf8');
  const paths = leafPaths(readYaml(join(chartDir, 'values.yaml')));

  it('documents every value in values.yaml', () => {
    expect(paths.length).toBeGreaterThan(100);
    expect(paths.filter((p) => !documented(readme, p))).toEqual([]);
  });

  it('documents no value that values.yaml does not have', () => {
    const rows = documentedRows(readme);
    const expanded = rows.flatMap((r) =>
      r.startsWith('<component>') ? COMPONENTS.map((c) => c + r.slice('<component>'.length)) : [r],
    );
    const known = (row: string) => paths.some((p) => p === row || p.startsWith(`${row}.`));
    expect(expanded.filter((r) => !known(r))).toEqual([]);
  });
});
