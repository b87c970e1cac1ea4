import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock.ts';
import { createLogger } from './logger.ts';
import { FallbackRateLimiter, MemoryRateLimiter, type RateLimiter } from './rate-limit.ts';

const logger = createLogger({ level: 'silent', service: 'test' });

describe('fixed-window rate limiting', () => {
  it('counts hits per key until the window ends, then starts over', async () => {
    const clock = new ManualClock(0);
    const limiter = new MemoryRateLimiter(clock, 60_000);
    expect(await limiter.hit('a')).toEqual({ count: 1, resetInMs: 60_000 });
    clock.advance(10_000);
    expect(await limiter.hit('a')).toEqual({ count: 2, resetInMs: 50_000 });
    expect(await limiter.hit('b')).toEqual({ count: 1, resetInMs: 60_000 });
    clock.advance(50_000);
    expect(await limiter.hit('a')).toEqual({ count: 1, resetInMs: 60_000 });
  });

  it('drops expired windows so memory stays bounded', async () => {
    const clock = new ManualClock(0);
    const limiter = new MemoryRateLimiter(clock, 1_000);
    for (let i = 0; i < 10; i++) await limiter.hit(`k${i}`);
    clock.advance(1_000);
    await limiter.hit('fresh');
    expect(limiter.size).toBe(1);
  });

  it('falls back to the in-memory limits while the primary fails, and returns to it', async () => {
    const clock = new ManualClock(0);
    let down = true;
    const primary: RateLimiter = {
      async hit() {
        if (down) throw new Error('redis down');
        return { count: 42, resetInMs: 5 };
      },
      async clear() {},
      async peek() {
        if (down) throw new Error('redis down');
        return 42;
      },
    };
    const limiter = new FallbackRateLimiter(primary, new MemoryRateLimiter(clock, 1_000), logger, 'test');
    expect(await limiter.hit('a')).toMatchObject({ count: 1 });
    expect(await limiter.hit('a')).toMatchObject({ count: 2 });
    expect(limiter.degraded).toBe(true);
    down = false;
    expect(await limiter.hit('a')).toEqual({ count: 42, resetInMs: 5 });
    expect(limiter.degraded).toBe(false);
    expect(await limiter.peek('a')).toBe(42);
    down = true;
    // The fallback's own count of the outage, not counted again by the peek.
    expect(await limiter.peek('a')).toBe(2);
    expect(await limiter.peek('a')).toBe(2);
  });
});
