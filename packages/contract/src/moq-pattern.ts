/**
 * moq's path patterns (upstream `moq-dev/moq`, crate `moq-pattern`): the grammar a relay grant,
 * a moq token's claims and a key's scope share, with the operations authorization needs —
 * matching, containment, rebasing beneath a root and rooting beneath one. Pure. The tests feed
 * it upstream's golden vectors (`rs/moq-pattern/tests/pattern.json`), so the two cannot drift.
 *
 * A pattern is `/`-separated segments: a literal (`room`), `*` (any one segment),
 * `prefix*suffix` (one segment with a known start and end), or `**` (any run of zero or more
 * segments, at most once). A pattern names exactly what it says: `room` is one broadcast,
 * `room/**` is `room` and everything beneath it, `**` is everything, the empty pattern is the
 * root itself.
 */

export type Segment =
  | { kind: 'literal'; value: string }
  | { kind: 'wildcard' }
  | { kind: 'partial'; prefix: string; suffix: string }
  | { kind: 'globstar' };

export interface Pattern {
  /** Canonical text: two patterns match the same paths exactly when their texts are equal. */
  readonly text: string;
  readonly segments: readonly Segment[];
  /** Index of the `**` segment, if any. */
  readonly globstar: number | undefined;
}

export type PatternErrorKind =
  | 'empty-segment'
  | 'invalid-segment'
  | 'multiple-globstars'
  | 'too-many-segments';

export class PatternError extends Error {
  readonly kind: PatternErrorKind;
  constructor(kind: PatternErrorKind, message: string) {
    super(message);
    this.name = 'PatternError';
    this.kind = kind;
  }
}

/** The most segments a pattern (or a path) may have, as on the wire. */
export const MAX_PATTERN_SEGMENTS = 32;

const WILDCARD: Segment = { kind: 'wildcard' };
const GLOBSTAR: Segment = { kind: 'globstar' };

function segmentText(segment: Segment): string {
  switch (segment.kind) {
    case 'literal':
      return segment.value;
    case 'wildcard':
      return '*';
    case 'partial':
      return `${segment.prefix}*${segment.suffix}`;
    case 'globstar':
      return '**';
  }
}

function parseSegment(text: string): Segment {
  if (text === '') throw new PatternError('empty-segment', 'empty path segment');
  if (text === '*') return WILDCARD;
  if (text === '**') return GLOBSTAR;
  const star = text.indexOf('*');
  if (star < 0) return { kind: 'literal', value: text };
  const suffix = text.slice(star + 1);
  if (suffix.includes('*'))
    throw new PatternError('invalid-segment', `invalid pattern segment: ${JSON.stringify(text)}`);
  return { kind: 'partial', prefix: text.slice(0, star), suffix };
}

/** A pattern from segments: validated, `**` moved before adjacent `*` (one text per language). */
export function patternOf(input: readonly Segment[]): Pattern {
  if (input.length > MAX_PATTERN_SEGMENTS)
    throw new PatternError('too-many-segments', `more than ${MAX_PATTERN_SEGMENTS} segments`);
  const segments = [...input];
  let globstar: number | undefined;
  for (const [i, segment] of segments.entries()) {
    const bad = () =>
      new PatternError('invalid-segment', `invalid pattern segment: ${JSON.stringify(segmentText(segment))}`);
    if (segment.kind === 'literal') {
      if (segment.value === '') throw new PatternError('empty-segment', 'empty path segment');
      if (/[*/]/.test(segment.value)) throw bad();
    } else if (segment.kind === 'partial') {
      if ((segment.prefix === '' && segment.suffix === '') || /[*/]/.test(segment.prefix + segment.suffix))
        throw bad();
    } else if (segment.kind === 'globstar') {
      if (globstar !== undefined) throw new PatternError('multiple-globstars', 'more than one ** segment');
      globstar = i;
    }
  }
  if (globstar !== undefined) {
    while (globstar > 0 && segments[globstar - 1]?.kind === 'wildcard') {
      segments[globstar] = WILDCARD;
      segments[globstar - 1] = GLOBSTAR;
      globstar--;
    }
  }
  return { text: segments.map(segmentText).join('/'), segments, globstar };
}

/**
 * Parses a pattern's text. Unlike a path, slashes are not normalised: a leading, trailing or
 * doubled `/` is an error, so a typo cannot silently widen a grant.
 */
export function parsePattern(text: string): Pattern {
  if (text === '') return patternOf([]);
  const parts = text.split('/');
  if (parts.length > MAX_PATTERN_SEGMENTS)
    throw new PatternError('too-many-segments', `more than ${MAX_PATTERN_SEGMENTS} segments`);
  return patternOf(parts.map(parseSegment));
}

/** A path's non-empty segments (leading, trailing and doubled slashes dropped). */
export function pathSegments(path: string): string[] {
  return path.split('/').filter((part) => part !== '');
}

function literalSegments(path: string): Segment[] {
  return pathSegments(path).map((value) => ({ kind: 'literal', value }));
}

/** The pattern matching exactly `path` (normalised); a `*` in it is an error. */
export function literalPattern(path: string): Pattern {
  return patternOf(literalSegments(path));
}

/** `path/**`: the path and everything beneath it (`**` for the empty path). */
export function subtreePattern(path: string): Pattern {
  const segments = literalSegments(path);
  if (segments.length < MAX_PATTERN_SEGMENTS) segments.push(GLOBSTAR);
  return patternOf(segments);
}

function split(pattern: Pattern): [readonly Segment[], readonly Segment[]] {
  if (pattern.globstar === undefined) return [pattern.segments, []];
  return [pattern.segments.slice(0, pattern.globstar), pattern.segments.slice(pattern.globstar + 1)];
}

function segmentMatches(segment: Segment, part: string): boolean {
  switch (segment.kind) {
    case 'literal':
      return segment.value === part;
    case 'wildcard':
      return true;
    case 'partial':
      return (
        part.length >= segment.prefix.length + segment.suffix.length &&
        part.startsWith(segment.prefix) &&
        part.endsWith(segment.suffix)
      );
    case 'globstar':
      return false;
  }
}

/** Whether every segment `b` matches, `a` matches too (`**` excluded: handled structurally). */
function segmentCovers(a: Segment, b: Segment): boolean {
  if (a.kind === 'wildcard') return b.kind !== 'globstar';
  if (a.kind === 'literal') return b.kind === 'literal' && a.value === b.value;
  if (a.kind === 'partial') {
    if (b.kind === 'literal') return segmentMatches(a, b.value);
    if (b.kind === 'partial') return b.prefix.startsWith(a.prefix) && b.suffix.endsWith(a.suffix);
  }
  return false;
}

function runMatches(segments: readonly Segment[], parts: readonly string[]): boolean {
  return segments.every((segment, i) => i >= parts.length || segmentMatches(segment, parts[i] as string));
}

function tailMatches(segments: readonly Segment[], parts: readonly string[]): boolean {
  return [...segments]
    .reverse()
    .every(
      (segment, i) => i >= parts.length || segmentMatches(segment, parts[parts.length - 1 - i] as string),
    );
}

/** Whether `path` (normalised) is one of the paths `pattern` names. */
export function patternMatches(pattern: Pattern, path: string): boolean {
  const parts = pathSegments(path);
  if (pattern.globstar === undefined)
    return parts.length === pattern.segments.length && runMatches(pattern.segments, parts);
  const [head, tail] = split(pattern);
  return parts.length >= head.length + tail.length && runMatches(head, parts) && tailMatches(tail, parts);
}

/**
 * Whether every path `inner` names, `outer` names too: the authorization check (a grant contains
 * a request when the request cannot name a path outside it). A pattern contains itself.
 */
export function patternContains(outer: Pattern, inner: Pattern): boolean {
  const pairwise = (ours: readonly Segment[], theirs: readonly Segment[]) =>
    ours.every((a, i) => {
      const b = theirs[i];
      return b === undefined ? a.kind === 'wildcard' : segmentCovers(a, b);
    });
  const reversed = (run: readonly Segment[]) => [...run].reverse();
  if (outer.globstar === undefined) {
    return (
      inner.globstar === undefined &&
      outer.segments.length === inner.segments.length &&
      outer.segments.every((a, i) => segmentCovers(a, inner.segments[i] as Segment))
    );
  }
  const [head, tail] = split(outer);
  if (inner.globstar === undefined) {
    const segments = inner.segments;
    return (
      segments.length >= head.length + tail.length &&
      head.every((a, i) => segmentCovers(a, segments[i] as Segment)) &&
      reversed(tail).every((a, i) => segmentCovers(a, segments[segments.length - 1 - i] as Segment))
    );
  }
  // The inner `**` may be arbitrarily long: any of our segments reaching past its head or tail
  // must be `*`, and its shortest path must still be long enough for ours.
  const [innerHead, innerTail] = split(inner);
  return (
    head.length + tail.length <= innerHead.length + innerTail.length &&
    pairwise(head, innerHead) &&
    pairwise(reversed(tail), reversed(innerTail))
  );
}

/** Whether some pattern of `union` contains `pattern` (containment is per pattern, as upstream). */
export function unionContains(union: readonly Pattern[], pattern: Pattern): boolean {
  return union.some((outer) => patternContains(outer, pattern));
}

/** `pattern` placed beneath the literal `root`: the same paths, named from the root's parent. */
export function rootedPattern(pattern: Pattern, root: string): Pattern {
  return patternOf([...literalSegments(root), ...pattern.segments]);
}

/**
 * The patterns that, relative to `root`, name exactly the paths `pattern` names beneath `root`
 * (sorted by text, no repeats; empty when nothing beneath `root` matches). A set because `**`
 * may consume the root or stop short of it.
 */
export function rebasePattern(pattern: Pattern, root: string): Pattern[] {
  const parts = pathSegments(root);
  const out = new Map<string, Pattern>();
  const add = (segments: readonly Segment[]) => {
    const rebased = patternOf(segments);
    out.set(rebased.text, rebased);
  };
  if (pattern.globstar === undefined) {
    if (parts.length <= pattern.segments.length && runMatches(pattern.segments, parts))
      add(pattern.segments.slice(parts.length));
  } else {
    const [head, tail] = split(pattern);
    if (!runMatches(head, parts)) return [];
    if (parts.length <= head.length) {
      add(pattern.segments.slice(parts.length));
    } else {
      // The root reaches into the `**`: it swallows the rest of the root and stays open, or it
      // closed inside the root and some of the tail already matched the root's last segments.
      const rest = parts.slice(head.length);
      add(pattern.segments.slice(pattern.globstar));
      for (let consumed = 1; consumed <= Math.min(tail.length, rest.length); consumed++) {
        if (runMatches(tail.slice(0, consumed), rest.slice(rest.length - consumed)))
          add(tail.slice(consumed));
      }
    }
  }
  return [...out.values()].sort((a, b) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0));
}

/**
 * The prefix a prefix-shaped pattern covers (literals then `**`: `room/**` → `room`, `**` → ``),
 * the form moq-token's legacy `put`/`get` claims hold; undefined for any other pattern.
 */
export function patternPrefix(pattern: Pattern): string | undefined {
  const last = pattern.segments.length - 1;
  if (pattern.globstar !== last) return undefined;
  const head = pattern.segments.slice(0, last);
  if (!head.every((s) => s.kind === 'literal')) return undefined;
  return head.map(segmentText).join('/');
}

/** Whether `path` is `root` or beneath it (segment-aware: `foo` is not a root of `foobar`); the rest. */
export function stripPathPrefix(path: string, root: string): string | undefined {
  const p = pathSegments(path);
  const r = pathSegments(root);
  if (r.length > p.length || r.some((segment, i) => p[i] !== segment)) return undefined;
  return p.slice(r.length).join('/');
}
