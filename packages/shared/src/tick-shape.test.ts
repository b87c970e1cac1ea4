import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// A child process with V8's test intrinsics: warms process.nextTick up, runs full collections
// with no tick record alive (what an idle second does in a server), ticks again, and prints
// whether a new record has the held one's map and the states of nextTick's inline caches for the
// record literal's keys.
const dir = mkdtempSync(join(tmpdir(), 'tick-shape-'));
const script = join(dir, 'child.mjs');
writeFileSync(
  script,
  `import { executionAsyncResource } from 'node:async_hooks';
import { retainTickRecordShape, retainedTickRecord } from ${JSON.stringify(join(import.meta.dirname, 'tick-shape.ts'))};
if (process.argv[2] === 'retain') retainTickRecordShape();
const tick = () => new Promise((resolve) => process.nextTick(resolve));
for (let i = 0; i < 2000; i++) await tick();
for (let i = 0; i < 6; i++) {
  globalThis.gc();
  await new Promise((resolve) => setTimeout(resolve, 10));
}
for (let i = 0; i < 2000; i++) await tick();
const record = retainedTickRecord();
// A record made after the collections: built along the same maps as the one held, if they lived.
const fresh = await new Promise((resolve) => process.nextTick(() => resolve(executionAsyncResource())));
console.log('RECORD ' + JSON.stringify(record ? Reflect.ownKeys(record).map(String) : null));
console.log('SAME_MAP ' + (record ? %HaveSameMap(record, fresh) : 'none'));
%DebugPrint(process.nextTick);
`,
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(mode: 'retain' | 'plain'): {
  record: string[] | null;
  sameMap: string | undefined;
  literalKeyStates: string[];
} {
  // The child's stdout goes to a file, not a pipe: %DebugPrint writes through C stdio, and Node
  // makes a pipe on fd 1 non-blocking, so whatever does not fit a full pipe is dropped at exit
  // without an error. A busy parent and a small pipe (a CI machine past pipe-user-pages-soft
  // gets 4 KB pipes) cut the output to its first 4 KB, before the inline caches are printed.
  const outFile = join(dir, `${mode}.out`);
  const fd = openSync(outFile, 'w');
  try {
    execFileSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', script, mode], {
      stdio: ['ignore', fd, 'inherit'],
    });
  } finally {
    closeSync(fd);
  }
  const out = readFileSync(outFile, 'utf8');
  const record = JSON.parse(/^RECORD (.*)$/m.exec(out)?.[1] ?? 'null') as string[] | null;
  const sameMap = /^SAME_MAP (.*)$/m.exec(out)?.[1];
  const literalKeyStates = [...out.matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map(
    (m) => m[1] as string,
  );
  return { record, sameMap, literalKeyStates };
}

describe('retainTickRecordShape', () => {
  it('holds a tick record: the callback and args of Node’s record literal', () => {
    const { record } = run('retain');
    expect(record).toEqual(expect.arrayContaining(['callback', 'args']));
  });

  it('keeps the record literal’s maps across idle collections: a new record gets the held one’s map', () => {
    const { sameMap, literalKeyStates } = run('retain');
    expect(sameMap).toBe('true');
    // The inline caches of the literal's five keys, as V8 prints them.
    expect(literalKeyStates).toEqual(Array(5).fill('MONOMORPHIC'));
  });

  it('is needed on this Node: without it the same collections leave the keys megamorphic', () => {
    // If this fails after a Node upgrade, V8 or Node no longer loses the record's maps:
    // tick-shape.ts can go.
    const { record, literalKeyStates } = run('plain');
    expect(record).toBeNull();
    expect(literalKeyStates).toHaveLength(5);
    expect(literalKeyStates).toContain('MEGAMORPHIC');
  });
});
