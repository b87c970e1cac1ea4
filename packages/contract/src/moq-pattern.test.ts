import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  literalPattern,
  PatternError,
  parsePattern,
  patternContains,
  patternMatches,
  patternPrefix,
  rebasePattern,
  rootedPattern,
  stripPathPrefix,
  subtreePattern,
  unionContains,
} from './moq-pattern.ts';

interface Vectors {
  parse: { text: string; canonical?: string; error?: string }[];
  literal: { path: string; pattern?: string; error?: string }[];
  subtree: { path: string; pattern: string }[];
  matches: { pattern: string; path: string; expect: boolean }[];
  contains: { outer: string; inner: string; expect: boolean }[];
  rebase: { pattern: string; root: string; expect: string[] }[];
  rooted: { pattern: string; root: string; expect?: string; error?: string }[];
  unionContains: { union: string[]; pattern: string; expect: boolean }[];
}

/** Upstream's golden vectors (moq-dev/moq rs/moq-pattern/tests/pattern.json). */
const vectors = JSON.parse(
  readFileSync(new URL('../vectors/moq-pattern.json', import.meta.url), 'utf8'),
) as Vectors;

function errorKind(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (err) {
    if (err instanceof PatternError) return err.kind;
    throw err;
  }
}

describe("moq patterns: upstream's golden vectors", () => {
  it('parses each text to its canonical form, or refuses it for the reason upstream names', () => {
    expect(vectors.parse.length).toBeGreaterThan(20);
    for (const v of vectors.parse) {
      if (v.error)
        expect(
          errorKind(() => parsePattern(v.text)),
          v.text,
        ).toBe(v.error);
      else expect(parsePattern(v.text).text, v.text).toBe(v.canonical);
    }
  });

  it('builds literal and subtree patterns from paths', () => {
    for (const v of vectors.literal) {
      if (v.error)
        expect(
          errorKind(() => literalPattern(v.path)),
          v.path,
        ).toBe(v.error);
      else expect(literalPattern(v.path).text, v.path).toBe(v.pattern);
    }
    for (const v of vectors.subtree) expect(subtreePattern(v.path).text, v.path).toBe(v.pattern);
  });

  it('matches paths as upstream does', () => {
    for (const v of vectors.matches)
      expect(patternMatches(parsePattern(v.pattern), v.path), `${v.pattern} ~ ${v.path}`).toBe(v.expect);
  });

  it('decides containment as upstream does', () => {
    for (const v of vectors.contains)
      expect(patternContains(parsePattern(v.outer), parsePattern(v.inner)), `${v.outer} ⊇ ${v.inner}`).toBe(
        v.expect,
      );
    for (const v of vectors.unionContains)
      expect(
        unionContains(v.union.map(parsePattern), parsePattern(v.pattern)),
        `${JSON.stringify(v.union)} ⊇ ${v.pattern}`,
      ).toBe(v.expect);
  });

  it('rebases beneath a root and roots beneath one as upstream does', () => {
    for (const v of vectors.rebase) {
      const rebased = rebasePattern(parsePattern(v.pattern), v.root).map((p) => p.text);
      expect(rebased, `${v.pattern} @ ${v.root}`).toEqual([...v.expect].sort());
    }
    for (const v of vectors.rooted) {
      if (v.error) expect(errorKind(() => rootedPattern(parsePattern(v.pattern), v.root))).toBe(v.error);
      else expect(rootedPattern(parsePattern(v.pattern), v.root).text).toBe(v.expect);
    }
  });
});

describe('moq patterns: what the token claims need', () => {
  it('names the prefix of prefix-shaped patterns only (the legacy put/get form)', () => {
    expect(patternPrefix(parsePattern('**'))).toBe('');
    expect(patternPrefix(parsePattern('room/cam/**'))).toBe('room/cam');
    expect(patternPrefix(parsePattern('room'))).toBeUndefined();
    expect(patternPrefix(parsePattern('room/*/**'))).toBeUndefined();
    expect(patternPrefix(parsePattern('**/x'))).toBeUndefined();
  });

  it('strips a root from a path on segment boundaries', () => {
    expect(stripPathPrefix('/a/b/c', 'a')).toBe('b/c');
    expect(stripPathPrefix('a/b', 'a/b/')).toBe('');
    expect(stripPathPrefix('ab/c', 'a')).toBeUndefined();
    expect(stripPathPrefix('a', 'a/b')).toBeUndefined();
  });
});
