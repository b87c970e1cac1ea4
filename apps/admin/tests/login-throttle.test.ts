import { createHash } from 'node:crypto';
import { ManualClock } from '@relayplane/shared/clock';
import {
  FallbackRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  RedisRateLimiter,
  type WindowHit,
} from '@relayplane/shared/rate-limit';
import { testLogger } from '@relayplane/testing/logger';
import { createTestRedis } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { throttleKeys } from '../src/redis/keys.ts';
import { loginThrottleConformance, WINDOW_MS } from './support/conformance/login-throttle.ts';
import { captureLogs } from './support/harness.ts';

async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const clocks = new Map<RateLimiter, ManualClock>();
loginThrottleConformance('memory', {
  create() {
    const clock = new ManualClock();
    const throttle = new MemoryRateLimiter(clock, WINDOW_MS);
    clocks.set(throttle, clock);
    return throttle;
  },
  async endWindow(throttle) {
    clocks.get(throttle)?.advance(WINDOW_MS);
  },
});

const testRedis = createTestRedis('loginthrottle');
const redis = new Redis(testRedis.url);
const prefixes = new Map<RateLimiter, string>();
let instance = 0;
loginThrottleConformance('redis', {
  create() {
    const prefix = `${testRedis.prefix}${++instance}:`;
    const throttle = new RedisRateLimiter(redis, prefix, WINDOW_MS);
    prefixes.set(throttle, prefix);
    return throttle;
  },
  async endWindow(throttle, key) {
    const full = `${prefixes.get(throttle)}${key}`;
    // Rewrites the window's TTL to 1 ms, then waits (bounded) until Redis expired the key.
    await redis.pexpire(full, 1);
    await waitFor(`${full} to expire`, async () => (await redis.exists(full)) === 0);
  },
  cleanup: () => testRedis.clean(),
});

afterAll(async () => {
  await testRedis.clean();
  redis.disconnect();
});

describe('throttle keys', () => {
  it('builds the documented keys, hashing the email', () => {
    const sha = createHash('sha256').update('ann@example.com').digest('hex');
    expect(throttleKeys.loginAccount('ann@example.com')).toBe(`login:acct:${sha}`);
    expect(throttleKeys.loginIp('203.0.113.7')).toBe('login:ip:203.0.113.7');
    expect(throttleKeys.loginAccountIp('ann@example.com', '203.0.113.7')).toBe(
      `login:acct-ip:${sha}:203.0.113.7`,
    );
    // Attempts without a client IP share one key per account.
    expect(throttleKeys.loginAccountIp('ann@example.com', '')).toBe(`login:acct-ip:${sha}:-`);
    expect(throttleKeys.signupIp('2001:db8::1')).toBe('signup:ip:2001:db8::1');
  });

  it('stores the Redis window under <prefix>login:acct:<sha256(email)> with the window as TTL', async () => {
    const prefix = `${testRedis.prefix}layout:`;
    const throttle = new RedisRateLimiter(redis, prefix, WINDOW_MS);
    await throttle.hit(throttleKeys.loginAccount('ann@example.com'));
    await throttle.hit(throttleKeys.loginIp('203.0.113.7'));
    const sha = createHash('sha256').update('ann@example.com').digest('hex');
    expect(await redis.get(`${prefix}login:acct:${sha}`)).toBe('1');
    expect(await redis.get(`${prefix}login:ip:203.0.113.7`)).toBe('1');
    const ttl = await redis.pttl(`${prefix}login:acct:${sha}`);
    expect(ttl).toBeGreaterThan(WINDOW_MS - 5_000);
    expect(ttl).toBeLessThanOrEqual(WINDOW_MS);
  });
});

describe('memory throttle housekeeping', () => {
  it('drops expired windows so the map does not grow without bound', async () => {
    const clock = new ManualClock();
    const throttle = new MemoryRateLimiter(clock, 1_000);
    for (let i = 0; i < 100; i++) await throttle.hit(`login:ip:10.0.0.${i}`);
    expect(throttle.size).toBe(100);
    clock.advance(1_000);
    await throttle.hit('login:ip:fresh');
    expect(throttle.size).toBe(1);
  });
});

/** A primary that fails while `down` is set. */
class Switchable implements RateLimiter {
  down = true;
  readonly inner = new MemoryRateLimiter(new ManualClock(), WINDOW_MS);
  async hit(key: string): Promise<WindowHit> {
    if (this.down) throw new Error('Connection is closed.');
    return this.inner.hit(key);
  }
  async clear(key: string): Promise<void> {
    if (this.down) throw new Error('Connection is closed.');
    return this.inner.clear(key);
  }
  async peek(key: string): Promise<number> {
    if (this.down) throw new Error('Connection is closed.');
    return this.inner.peek(key);
  }
}

describe('the login throttle with its fallback', () => {
  it('counts in memory while the primary fails, warns once, and goes back to the primary when it answers', async () => {
    const logs = captureLogs();
    const primary = new Switchable();
    const throttle = new FallbackRateLimiter(
      primary,
      new MemoryRateLimiter(new ManualClock(), WINDOW_MS),
      logs.logger,
      'login throttle',
    );
    for (let i = 1; i <= 5; i++) expect((await throttle.hit('login:acct:x')).count).toBe(i);
    expect(throttle.degraded).toBe(true);
    const warnings = () =>
      logs.lines.filter((l) => JSON.parse(l).msg === 'login throttle falling back to in-memory limits');
    expect(warnings()).toHaveLength(1);

    primary.down = false;
    expect((await throttle.hit('login:acct:x')).count).toBe(1);
    expect(throttle.degraded).toBe(false);
    await logs.waitFor('login throttle back on redis');

    primary.down = true;
    expect((await throttle.hit('login:acct:x')).count).toBe(6);
    expect(warnings()).toHaveLength(2);
  });

  it('falls back when Redis is unreachable (closed port), never answering "no limit"', async () => {
    const dead = new Redis('redis://127.0.0.1:1', {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    dead.on('error', () => {});
    const throttle = new FallbackRateLimiter(
      new RedisRateLimiter(dead, 'dead:', WINDOW_MS),
      new MemoryRateLimiter(new ManualClock(), WINDOW_MS),
      testLogger('throttle'),
      'login throttle',
    );
    try {
      for (let i = 1; i <= 3; i++) expect((await throttle.hit('login:ip:1.2.3.4')).count).toBe(i);
      await throttle.clear('login:ip:1.2.3.4');
      expect((await throttle.hit('login:ip:1.2.3.4')).count).toBe(1);
      expect(throttle.degraded).toBe(true);
    } finally {
      dead.disconnect();
    }
  });
});
