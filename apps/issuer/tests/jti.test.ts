import { describe, expect, it } from 'vitest';
import { isJti, newJti } from '../src/keys/jwt.ts';

describe('newJti', () => {
  it('answers crd_ + 20 base32 characters, never the same twice across many pool refills', () => {
    // 1,000 ids draw 20,000 bytes: the 4 KiB pool is refilled four times.
    const ids = Array.from({ length: 1_000 }, newJti);
    expect(ids.every(isJti)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('uses every symbol of the alphabet about equally often', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 2_000; i++) {
      for (const c of newJti().slice(4)) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    // 40,000 symbols over 32: 1,250 each expected; a stuck or biased source would be far off.
    expect(counts.size).toBe(32);
    for (const n of counts.values()) {
      expect(n).toBeGreaterThan(1_000);
      expect(n).toBeLessThan(1_500);
    }
  });
});
