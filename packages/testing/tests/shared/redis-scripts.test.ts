/**
 * The Lua script loader against the test Redis: a script Redis has never seen runs (EVAL after
 * NOSCRIPT), and then runs by its SHA alone.
 */
import { randomUUID } from 'node:crypto';
import { scriptOf } from '@relayplane/shared/redis-scripts';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestRedis } from '../../src/storage.ts';

const testRedis = createTestRedis('scripts');
const redis = new Redis(testRedis.url);

afterAll(async () => {
  await testRedis.clean();
  redis.disconnect();
});

describe('Lua scripts on Redis', () => {
  it('runs a script Redis does not know yet, then by EVALSHA alone', async () => {
    // A comment of its own: no other run has put this script in Redis's cache.
    const script = scriptOf(
      'incr-by',
      1,
      `-- ${randomUUID()}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])`,
    );
    expect(await redis.script('EXISTS', script.sha)).toEqual([0]);
    const key = `${testRedis.prefix}counter`;
    expect(await script.run(redis, [key], [2])).toBe(2);
    expect(await redis.script('EXISTS', script.sha)).toEqual([1]);
    expect(await redis.evalsha(script.sha, 1, key, 3)).toBe(5);
    expect(await script.run(redis, [key], [1])).toBe(6);
  });
});
