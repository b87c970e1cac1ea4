/** Time formatting of the public JSON shapes. */
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { iso, isoSecond } from '../src/present.ts';

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
