import { describe, expect, it } from 'vitest';
import { derivedId, ID_PREFIXES, type IdKind, isId, newId } from './ids.ts';

const KINDS = Object.keys(ID_PREFIXES) as IdKind[];

describe('ids', () => {
  it.each(KINDS)('a new %s id carries its prefix and matches the id pattern', (kind) => {
    const id = newId(kind);
    expect(id.startsWith(`${ID_PREFIXES[kind]}_`)).toBe(true);
    expect(id).toMatch(/^[a-z]{3}_[0-9a-hjkmnp-tv-z]{20}$/);
    expect(isId(kind, id)).toBe(true);
  });

  it('every kind has a distinct prefix', () => {
    const prefixes = Object.values(ID_PREFIXES);
    expect(new Set(prefixes).size).toBe(prefixes.length);
  });

  it('isId rejects an id of another kind, a wrong length and foreign characters', () => {
    const id = newId('project');
    expect(isId('tenant', id)).toBe(false);
    expect(isId('project', id.slice(0, -1))).toBe(false);
    expect(isId('project', `${id}a`)).toBe(false);
    expect(isId('project', `${id.slice(0, -1)}A`)).toBe(false);
    expect(isId('project', `${id.slice(0, -1)}-`)).toBe(false);
    expect(isId('project', ` ${id}`)).toBe(false);
  });

  it('generates 10k distinct ids', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) seen.add(newId('apiKey'));
    expect(seen.size).toBe(10_000);
  });

  it('uses every symbol of the 32-character alphabet (no bias toward a subset)', () => {
    const symbols = new Set<string>();
    for (let i = 0; i < 500; i++) for (const c of newId('bot').slice(4)) symbols.add(c);
    expect(symbols.size).toBe(32);
  });
});

describe('derivedId', () => {
  it('is the same for the same seed, differs for another, and is a valid id of its kind', () => {
    const a = derivedId('webhookMessage', 'event-1:ten_x');
    expect(derivedId('webhookMessage', 'event-1:ten_x')).toBe(a);
    expect(derivedId('webhookMessage', 'event-1:ten_y')).not.toBe(a);
    expect(isId('webhookMessage', a)).toBe(true);
    expect(a).toMatch(/^msg_[0-9a-z]{20}$/);
  });
});
