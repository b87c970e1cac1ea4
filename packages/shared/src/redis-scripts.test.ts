import { describe, expect, it } from 'vitest';
import { loadScript, scriptOf } from './redis-scripts.ts';

/** A connection that records what it was sent and answers like Redis's script cache. */
function fakeRedis(options: { known?: Set<string>; fail?: Error } = {}) {
  const known = options.known ?? new Set<string>();
  const sent: { cmd: string; args: unknown[] }[] = [];
  return {
    sent,
    evalsha: async (sha: string, ...args: unknown[]) => {
      sent.push({ cmd: 'evalsha', args: [sha, ...args] });
      if (options.fail) throw options.fail;
      if (!known.has(sha)) throw new Error('NOSCRIPT No matching script. Please use EVAL.');
      return 'ran';
    },
    eval: async (lua: string, ...args: unknown[]) => {
      sent.push({ cmd: 'eval', args: [lua, ...args] });
      return 'ran';
    },
  };
}

describe('Lua scripts', () => {
  it('takes its key count from the file name and reads the file next to the caller', () => {
    const script = loadScript(new URL('./fixed-window-1.lua', import.meta.url));
    expect(script).toMatchObject({ name: 'fixed-window', numberOfKeys: 1 });
    expect(script.lua).toContain("redis.call('INCR', KEYS[1])");
    expect(script.sha).toMatch(/^[0-9a-f]{40}$/);
  });

  it('refuses a file not named by its key count', () => {
    expect(() => loadScript(new URL('./no-count.lua', import.meta.url))).toThrow(/<number of keys>\.lua/);
  });

  it('runs by EVALSHA, and by EVAL once when Redis does not know the script (NOSCRIPT)', async () => {
    const script = scriptOf('t', 2, "return redis.call('GET', KEYS[1])");
    const unknown = fakeRedis();
    expect(await script.run(unknown, ['a', 'b'], [1, 'x'])).toBe('ran');
    expect(unknown.sent).toEqual([
      { cmd: 'evalsha', args: [script.sha, 2, 'a', 'b', 1, 'x'] },
      { cmd: 'eval', args: [script.lua, 2, 'a', 'b', 1, 'x'] },
    ]);
    const known = fakeRedis({ known: new Set([script.sha]) });
    await script.run(known, ['a', 'b'], []);
    expect(known.sent.map((s) => s.cmd)).toEqual(['evalsha']);
  });

  it('passes any other error on without running the script again', async () => {
    const script = scriptOf('t', 1, 'return 1');
    const down = fakeRedis({ fail: new Error('Connection is closed.') });
    await expect(script.run(down, ['a'], [])).rejects.toThrow('Connection is closed.');
    expect(down.sent.map((s) => s.cmd)).toEqual(['evalsha']);
  });

  it('refuses a call with another number of keys than the script takes', async () => {
    const script = scriptOf('t', 2, 'return 1');
    const redis = fakeRedis();
    await expect(script.run(redis, ['a'], [])).rejects.toThrow('script t takes 2 keys, called with 1');
    expect(redis.sent).toEqual([]);
  });
});
