import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from './db.ts';
import { createLogger } from './logger.ts';
import { type Checkpoints, startCheckpoints } from './pglite-checkpoints.ts';

/**
 * PGlite runs no checkpointer: these pin that the service checkpoints its embedded databases
 * (`pglite-checkpoints.ts`), so that `pg_wal` stays bounded and a killed process does not replay
 * everything it ever wrote. Every check reads PostgreSQL's own record of its last checkpoint.
 *
 * One database serves the first three (creating one runs initdb: seconds, more on a loaded CI
 * machine), each with a checkpointer of its own options started on it; the one `createDatabase`
 * starts there has PostgreSQL's thresholds, far from anything these write. The last one goes
 * through `createDatabase`'s own.
 */
describe('PGlite checkpoints (embedded mode)', () => {
  const dirs: string[] = [];
  let database: Database<unknown>;
  let checkpoints: Checkpoints | undefined;
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(
    { level: 'info', service: 'test' },
    new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    }),
  );
  const silent = createLogger({ level: 'silent', service: 'test' });
  const logged = () => lines.filter((l) => l.msg === 'pglite checkpoint');

  const newDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'relayplane-checkpoints-'));
    dirs.push(dir);
    return dir;
  };

  beforeAll(async () => {
    database = await createDatabase<unknown>({ kind: 'pglite', dataDir: newDir() }, 'demo', silent);
    await sql`create table demo_rows (id int primary key, payload text)`.execute(database.db);
  }, 120_000);

  afterAll(async () => {
    await checkpoints?.stop();
    await database?.destroy();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const start = async (options: Parameters<typeof startCheckpoints>[2]) => {
    await checkpoints?.stop();
    lines.length = 0;
    checkpoints = await startCheckpoints(database.db, logger, options);
    return checkpoints;
  };

  const control = async (db: Database<unknown>) => {
    const { rows } = await sql<{ checkpoint: string; since: number }>`
      select checkpoint_lsn::text as checkpoint,
             pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::float8 as since
        from pg_control_checkpoint()`.execute(db.db);
    return rows[0] as { checkpoint: string; since: number };
  };

  const until = async (what: () => Promise<boolean>, ms = 30_000) => {
    const deadline = Date.now() + ms;
    while (!(await what())) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };

  let nextId = 1;
  /** About 1 KB of WAL a row. */
  const write = (db: Database<unknown>, rows: number) => {
    const from = nextId;
    nextId += rows;
    return sql`insert into demo_rows
          select g, repeat(md5(g::text), 32) from generate_series(${from}::int, ${from + rows - 1}::int) g`.execute(
      db.db,
    );
  };

  it('defaults to PostgreSQL’s own trigger: max_wal_size / (1 + checkpoint_completion_target), checkpoint_timeout', async () => {
    const defaults = await start({});
    expect(defaults.walBytes).toBe(Math.floor((1024 * 1024 * 1024) / 1.9));
    expect(defaults.timeoutMs).toBe(300_000);
  });

  it('checkpoints once the WAL since the last checkpoint reaches its threshold, and logs it', async () => {
    const walBytes = 4 * 1024 * 1024;
    await start({ checkMs: 50, walBytes, timeoutMs: 3_600_000 });
    const before = await control(database);
    // About 12 MB of WAL, three times the threshold.
    for (let i = 0; i < 6; i++) await write(database, 2_000);
    // The log line follows the checkpoint: wait for both.
    await until(async () => logged().length > 0 && (await control(database)).since < walBytes);
    expect((await control(database)).checkpoint).not.toBe(before.checkpoint);
    const [first] = logged();
    expect(first).toMatchObject({ cause: 'wal', level: 30 });
    expect(first?.walBytes).toBeGreaterThanOrEqual(walBytes);
    expect(typeof first?.ms).toBe('number');
  }, 60_000);

  it('without writes, no checkpoint; after checkpoint_timeout with one row written, one', async () => {
    await start({ checkMs: 25, walBytes: 1024 * 1024 * 1024, timeoutMs: 300 });
    await write(database, 10);
    // That write is checkpointed first, then any hint bits reads set after it (with data
    // checksums they are WAL-logged): wait for a second with no new checkpoint.
    await until(async () => logged().length > 0);
    let count = -1;
    let settled = await control(database);
    await until(async () => {
      const before = { lines: lines.length, checkpoint: settled.checkpoint };
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      settled = await control(database);
      count = lines.length;
      return count === before.lines && settled.checkpoint === before.checkpoint;
    });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await control(database)).checkpoint).toBe(settled.checkpoint);
    expect(lines).toHaveLength(count);

    await write(database, 1);
    await until(async () => lines.length > count);
    expect((await control(database)).checkpoint).not.toBe(settled.checkpoint);
    expect(lines.slice(count)).toEqual([
      expect.objectContaining({ msg: 'pglite checkpoint', cause: 'time' }),
    ]);
  }, 60_000);

  it('createDatabase checkpoints PGlite on its own, and what it stored is there after a reopen', async () => {
    const dir = newDir();
    const walBytes = 1024 * 1024;
    const first = await createDatabase<unknown>(
      { kind: 'pglite', dataDir: dir, checkpoints: { checkMs: 25, walBytes, timeoutMs: 3_600_000 } },
      'demo',
      silent,
    );
    try {
      await sql`create table demo_rows (id int primary key, payload text)`.execute(first.db);
      const before = await control(first);
      nextId = 1;
      await write(first, 3_000);
      await until(async () => (await control(first)).since < walBytes);
      expect((await control(first)).checkpoint).not.toBe(before.checkpoint);
      await write(first, 10);
    } finally {
      await first.destroy();
    }
    const second = await createDatabase<unknown>({ kind: 'pglite', dataDir: dir }, 'demo', silent);
    try {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from demo_rows`.execute(second.db);
      expect(rows[0]?.n).toBe(3_010);
    } finally {
      await second.destroy();
    }
  }, 120_000);
});
