/** Time formatting of the public JSON shapes. */
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { iso, isoSecond, parseRfc3339 } from '../src/present.ts';

describe('isoSecond', () => {
  it('formats whole seconds like iso, also when the second changes back and forth', () => {
    for (const ms of [1_700_000_000_000, 1_700_000_000_000, 1_700_000_001_000, 1_700_000_000_000, 0]) {
      const ts = timestampFromDate(new Date(ms));
      expect(isoSecond(ts)).toBe(new Date(ms).toISOString());
      expect(isoSecond(ts)).toBe(iso(ts));
    }
  });

  it('keeps sub-second precision and an absent time as iso does', () => {
    const ts = timestampFromDate(new Date(1_700_000_000_123));
    expect(isoSecond(ts)).toBe('2023-11-14T22:13:20.123Z');
    expect(isoSecond(undefined)).toBeUndefined();
  });
});

describe('parseRfc3339', () => {
  it('reads RFC 3339 date-times with a zone, offsets and fractions included', () => {
    expect(parseRfc3339('2026-11-25T12:00:00Z')).toBe(Date.UTC(2026, 10, 25, 12));
    expect(parseRfc3339('2026-11-25t12:00:00.123456789z')).toBe(Date.UTC(2026, 10, 25, 12, 0, 0, 123));
    expect(parseRfc3339('2026-11-25 13:30:00+01:30')).toBe(Date.UTC(2026, 10, 25, 12));
    expect(parseRfc3339('2024-02-29T23:00:00-01:00')).toBe(Date.UTC(2024, 2, 1, 0));
    expect(parseRfc3339('0050-01-01T00:00:00Z')).toBe(new Date('0050-01-01T00:00:00Z').getTime());
  });

  it('refuses impossible dates and times instead of rolling them over', () => {
    for (const text of [
      '2026-02-31T00:00:00Z',
      '2026-02-29T00:00:00Z',
      '2026-00-10T00:00:00Z',
      '2026-01-00T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T00:60:00Z',
      '2016-12-31T23:59:60Z',
      '2026-01-01T00:00:00+24:00',
      '2026-01-01T00:00:00+01:60',
      '2026-01-01',
      '2026-01-01T00:00:00',
      'Jan 1 2026 00:00:00Z',
    ]) {
      expect(parseRfc3339(text), text).toBeUndefined();
    }
  });
});
