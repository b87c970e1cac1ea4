import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from './db.ts';
import { createLogger } from './logger.ts';
import { startCheckpoints } from './pglite-checkpoints.ts';

/**
 * PGlite runs no checkpointer: these pin that the service checkpoints its embedded databases
 * (`pglite-checkpoints.ts`), so that `pg_wal` stays bounded and a killed process does not replay
 * everything it ever wrote. Every check reads PostgreSQL's own record of its last checkpoint.
 */
describe('PGlite checkpoints (embedded mode)', () => {
  const dirs: string[] = [];
  const open: Database<unknown>[] = [];

  afterEach(async () => {
    for (const database of open.splice(0)) await database.destroy();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  async function database(checkpoints: Parameters<typeof startCheckpoints>[2]) {
    const dir = mkdtempSync(join(tmpdir(), 'relayplane-checkpoints-'));
    dirs.push(dir);
    const lines: Record<string, unknown>[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const db = await createDatabase<unknown>(
      { kind: 'pglite', dataDir: dir, checkpoints },
      'demo',
      createLogger({ level: 'info', service: 'test' }, destination),
    );
    open.push(db);
    await sql`create table demo_rows (id int primary key, payload text)`.execute(db.db);
    return { db, lines };
  }

  const control = async (db: Database<unknown>) => {
    const { rows } = await sql<{ checkpoint: string; since: number }>`
      select checkpoint_lsn::text as checkpoint,
             pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::float8 as since
        from pg_control_checkpoint()`.execute(db.db);
    return rows[0] as { checkpoint: string; since: number };
  };

  const until = async (what: () => Promise<boolean>, ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (!(await what())) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };

  const write = (db: Database<unknown>, from: number, rows: number) =>
    sql`insert into demo_rows
          select g, repeat(md5(g::text), 32) from generate_series(${from}::int, ${from + rows - 1}::int) g`.execute(
      db.db,
    );

  it('defaults to PostgreSQL’s own trigger: max_wal_size / (1 + checkpoint_completion_target), checkpoint_timeout', async () => {
    const { db } = await database(undefined);
    const checkpoints = await startCheckpoints(db.db, createLogger({ level: 'silent', service: 'test' }), {});
    await checkpoints.stop();
    expect(checkpoints.walBytes).toBe(Math.floor((1024 * 1024 * 1024) / 1.9));
    expect(checkpoints.timeoutMs).toBe(300_000);
  });

  it('checkpoints once the WAL since the last checkpoint reaches its threshold, and logs it', async () => {
    const walBytes = 4 * 1024 * 1024;
    const { db, lines } = await database({ checkMs: 50, walBytes, timeoutMs: 3_600_000 });
    const before = await control(db);
    // ~1 KB a row: about 12 MB of WAL, three times the threshold.
    for (let i = 0; i < 6; i++) await write(db, i * 2_000 + 1, 2_000);
    await until(async () => (await control(db)).since < walBytes);
    const after = await control(db);
    expect(after.checkpoint).not.toBe(before.checkpoint);
    const logged = lines.filter((l) => l.msg === 'pglite checkpoint');
    expect(logged.length).toBeGreaterThan(0);
    expect(logged[0]).toMatchObject({ cause: 'wal', level: 30 });
    expect(logged[0]?.walBytes).toBeGreaterThanOrEqual(walBytes);
    expect(typeof logged[0]?.ms).toBe('number');
  });

  it('without writes, no checkpoint; after checkpoint_timeout with one row written, one', async () => {
    const { db, lines } = await database({ checkMs: 25, walBytes: 1024 * 1024 * 1024, timeoutMs: 300 });
    // What opening and the table wrote is checkpointed first (and the reads' hint bits after it).
    await until(async () => lines.some((l) => l.msg === 'pglite checkpoint'));
    await new Promise((resolve) => setTimeout(resolve, 800));
    const settled = await control(db);
    const count = lines.length;
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect((await control(db)).checkpoint).toBe(settled.checkpoint);
    expect(lines).toHaveLength(count);

    await write(db, 1, 1);
    await until(async () => (await control(db)).checkpoint !== settled.checkpoint);
    expect(lines.slice(count).filter((l) => l.msg === 'pglite checkpoint')).toEqual([
      expect.objectContaining({ cause: 'time' }),
    ]);
  });

  it('a database that checkpointed keeps what it stored across a reopen', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relayplane-checkpoints-'));
    dirs.push(dir);
    const logger = createLogger({ level: 'silent', service: 'test' });
    const first = await createDatabase<unknown>(
      {
        kind: 'pglite',
        dataDir: dir,
        checkpoints: { checkMs: 25, walBytes: 1024 * 1024, timeoutMs: 3_600_000 },
      },
      'demo',
      logger,
    );
    await sql`create table demo_rows (id int primary key, payload text)`.execute(first.db);
    await write(first, 1, 3_000);
    await until(async () => (await control(first)).since < 1024 * 1024);
    await write(first, 3_001, 10);
    await first.destroy();
    const second = await createDatabase<unknown>({ kind: 'pglite', dataDir: dir }, 'demo', logger);
    open.push(second);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from demo_rows`.execute(second.db);
    expect(rows[0]?.n).toBe(3_010);
  });
});
