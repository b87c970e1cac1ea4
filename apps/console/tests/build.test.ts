/** When `pnpm start` rebuilds the console (scripts/build.ts): exactly when an input changed. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { inputsDigest, isStale } from '../scripts/build.ts';

describe('console build staleness', () => {
  const roots: string[] = [];
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  function project(): string {
    const root = mkdtempSync(join(tmpdir(), 'console-inputs-'));
    roots.push(root);
    mkdirSync(join(root, 'src', 'pages'), { recursive: true });
    writeFileSync(join(root, 'index.html'), '<!doctype html>');
    writeFileSync(join(root, 'vite.config.ts'), 'export default {};');
    writeFileSync(join(root, 'package.json'), '{}');
    writeFileSync(join(root, 'src', 'main.tsx'), 'render();');
    writeFileSync(join(root, 'src', 'pages', 'a.tsx'), 'export const A = 1;');
    return root;
  }

  function built(root: string): void {
    mkdirSync(join(root, 'dist'), { recursive: true });
    writeFileSync(join(root, 'dist', 'index.html'), '<!doctype html>');
    writeFileSync(join(root, 'dist', '.inputs-sha256'), `${inputsDigest(root)}\n`);
  }

  it('is stale without a build, current after one, stale again when any source changes', () => {
    const root = project();
    expect(isStale(root)).toBe(true);
    built(root);
    expect(isStale(root)).toBe(false);
    writeFileSync(join(root, 'src', 'pages', 'a.tsx'), 'export const A = 2;');
    expect(isStale(root)).toBe(true);
    built(root);
    writeFileSync(join(root, 'src', 'pages', 'b.tsx'), 'export const B = 1;');
    expect(isStale(root)).toBe(true);
    built(root);
    writeFileSync(join(root, 'index.html'), '<!doctype html><title>x</title>');
    expect(isStale(root)).toBe(true);
  });

  it('a renamed file changes the digest even with the same contents', () => {
    const root = project();
    const before = inputsDigest(root);
    rmSync(join(root, 'src', 'pages', 'a.tsx'));
    writeFileSync(join(root, 'src', 'pages', 'c.tsx'), 'export const A = 1;');
    expect(inputsDigest(root)).not.toBe(before);
  });

  it('a build without its stamp (or without index.html) is stale', () => {
    const root = project();
    built(root);
    rmSync(join(root, 'dist', '.inputs-sha256'));
    expect(isStale(root)).toBe(true);
    built(root);
    rmSync(join(root, 'dist', 'index.html'));
    expect(isStale(root)).toBe(true);
  });
});
