/** The gateway's read-through cache: single-flight loads, hard TTL, and the synchronous peek the hot path uses. */
import { AppError } from '@relayplane/contract/errors';
import { describe, expect, it } from 'vitest';
import { TtlCache } from '../src/ttl-cache.ts';

describe('TtlCache', () => {
  it('loads once for concurrent readers and serves the value until the TTL passes', async () => {
    const cache = new TtlCache<string, number>(1_000);
    let loads = 0;
    const load = async () => ++loads;
    const [a, b] = await Promise.all([cache.get('k', load, 0), cache.get('k', load, 10)]);
    expect([a, b, loads]).toEqual([1, 1, 1]);
    expect(await cache.get('k', load, 999)).toBe(1);
    expect(await cache.get('k', load, 1_000)).toBe(2);
  });

  it('peeks only at loaded, fresh values', async () => {
    const cache = new TtlCache<string, string>(1_000);
    let release: (v: string) => void = () => {};
    const pending = cache.get('k', () => new Promise((resolve) => (release = resolve)), 0);
    expect(cache.peek('k', 1)).toBeUndefined();
    release('v');
    await pending;
    expect(cache.peek('k', 999)).toBe('v');
    expect(cache.peek('k', 1_000)).toBeUndefined();
    expect(cache.peek('other', 1)).toBeUndefined();
    cache.delete('k');
    expect(cache.peek('k', 2)).toBeUndefined();
  });

  it('never peeks a failure; caches "unknown" failures for the TTL and forgets transient ones', async () => {
    const cache = new TtlCache<string, string>(1_000);
    let loads = 0;
    const unknown = async () => {
      loads++;
      throw new AppError('unauthenticated', 'invalid or expired token');
    };
    await expect(cache.get('k', unknown, 0)).rejects.toMatchObject({ code: 'unauthenticated' });
    expect(cache.peek('k', 1)).toBeUndefined();
    await expect(cache.get('k', unknown, 2)).rejects.toMatchObject({ code: 'unauthenticated' });
    expect(loads).toBe(1);

    const transient = async () => {
      loads++;
      throw new AppError('unavailable', 'admin is unavailable');
    };
    await expect(cache.get('t', transient, 0)).rejects.toMatchObject({ code: 'unavailable' });
    await expect(cache.get('t', transient, 1)).rejects.toMatchObject({ code: 'unavailable' });
    expect(loads).toBe(3);
  });

  it('drops the loaded entries a predicate matches, and only those', async () => {
    const cache = new TtlCache<string, { id: string }>(1_000);
    await cache.get('a', async () => ({ id: 'key_1' }), 0);
    await cache.get('b', async () => ({ id: 'key_2' }), 0);
    await cache.get('c', async () => ({ id: 'key_1' }), 0);
    cache.deleteWhere((v) => v.id === 'key_1');
    expect(cache.peek('a', 1)).toBeUndefined();
    expect(cache.peek('c', 1)).toBeUndefined();
    expect(cache.peek('b', 1)).toEqual({ id: 'key_2' });
  });
});
