/**
 * Lua scripts, one `.lua` file each, run by EVALSHA (EVAL once when Redis does not know the
 * script yet: after a restart, a failover, SCRIPT FLUSH, or on a cluster node that has not run
 * it). As in bullmq, a script's file is named by its key count: `fixed-window-1.lua` takes one
 * key, `claim-refusal-2.lua` two; `run` refuses a call with another number of keys.
 *
 * The file is read next to the module that loads it (`new URL('./x-1.lua', import.meta.url)`),
 * so the package's build copies `src/**\/*.lua` to `dist/` beside the compiled JavaScript.
 *
 * Redis Cluster: EVALSHA and EVAL go to the master of the first key's slot, and a script may
 * touch only keys of that slot: the caller's keys module hash-tags keys a script uses together.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';

/** The commands a script needs (a `Redis` or a cluster client typed as one). */
type ScriptConnection = Pick<Redis, 'evalsha' | 'eval'>;

export interface RedisScript {
  /** The file's name without `-<keys>.lua` (for messages). */
  readonly name: string;
  readonly numberOfKeys: number;
  readonly lua: string;
  /** SHA-1 of `lua`: the name Redis's script cache knows it by. */
  readonly sha: string;
  /** Runs the script with `keys` (exactly `numberOfKeys` of them) and `args`; answers its reply. */
  run(redis: ScriptConnection, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>;
}

/** Loads the script at `file` (a URL relative to the caller's `import.meta.url`), named `<name>-<keys>.lua`. */
export function loadScript(file: URL): RedisScript {
  const fileName = basename(fileURLToPath(file));
  const named = /^(.+)-(\d+)\.lua$/.exec(fileName);
  if (!named?.[1] || !named[2])
    throw new Error(`a script's file is named <name>-<number of keys>.lua: ${fileName}`);
  return scriptOf(named[1], Number(named[2]), readFileSync(file, 'utf8'));
}

/** A script from its source (tests, and callers that build one). */
export function scriptOf(name: string, numberOfKeys: number, lua: string): RedisScript {
  const sha = createHash('sha1').update(lua).digest('hex');
  return {
    name,
    numberOfKeys,
    lua,
    sha,
    async run(redis, keys, args) {
      if (keys.length !== numberOfKeys) {
        throw new Error(`script ${name} takes ${numberOfKeys} keys, called with ${keys.length}`);
      }
      try {
        return await redis.evalsha(sha, numberOfKeys, ...keys, ...args);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return await redis.eval(lua, numberOfKeys, ...keys, ...args);
      }
    },
  };
}
