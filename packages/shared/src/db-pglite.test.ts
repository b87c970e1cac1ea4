import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from './db.ts';
import { createLogger } from './logger.ts';

interface DB {
  rows: { id: string };
}

/**
 * PGlite has one connection, and kysely's driver for it sends a statement into whichever
 * transaction is open on it. What keeps callers apart is kysely's connection mutex (its PGlite
 * adapter says `supportsMultipleConnections: false`): these pin that, since a rollback taking
 * another caller's answered write with it would lose stored credentials in embedded mode.
 */
describe('PGlite (embedded mode): one connection shared by every caller', () => {
  let dir: string;
  let database: Database<DB>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relayplane-pglite-'));
    database = await createDatabase<DB>(
      { kind: 'pglite', dataDir: dir },
      'demo',
      createLogger({ level: 'silent', service: 'test' }),
    );
    await sql`create schema demo`.execute(database.db);
    await sql`create table demo.rows (id text primary key)`.execute(database.db);
  });

  afterAll(async () => {
    await database.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    await database.db.deleteFrom('rows').execute();
  });

  const ids = async () =>
    (await database.db.selectFrom('rows').select('id').orderBy('id').execute()).map((r) => r.id);

  it('a statement sent while a transaction is open is not part of it: the rollback keeps it', async () => {
    let inside!: () => void;
    const opened = new Promise<void>((resolve) => {
      inside = resolve;
    });
    const failing = database.db.transaction().execute(async (trx) => {
      await trx.insertInto('rows').values({ id: 'in-rolled-back' }).execute();
      inside();
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw new Error('roll back');
    });
    await opened;
    // Another caller, answered success: its row must survive the other transaction's rollback.
    await database.db.insertInto('rows').values({ id: 'outside' }).execute();
    await expect(failing).rejects.toThrow('roll back');
    expect(await ids()).toEqual(['outside']);
  });

  it('concurrent transactions each commit their own rows', async () => {
    const results = await Promise.all(
      ['a', 'b', 'c'].map((id) =>
        database.db.transaction().execute(async (trx) => {
          await trx.insertInto('rows').values({ id }).execute();
          await new Promise((resolve) => setTimeout(resolve, 10));
          await trx
            .insertInto('rows')
            .values({ id: `${id}2` })
            .execute();
          return id;
        }),
      ),
    );
    expect(results).toEqual(['a', 'b', 'c']);
    expect(await ids()).toEqual(['a', 'a2', 'b', 'b2', 'c', 'c2']);
  });

  it('a transaction that fails does not take a concurrent one down with it', async () => {
    const failing = database.db.transaction().execute(async (trx) => {
      await trx.insertInto('rows').values({ id: 'lost' }).execute();
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw new Error('roll back');
    });
    const committing = database.db.transaction().execute(async (trx) => {
      await trx.insertInto('rows').values({ id: 'kept' }).execute();
    });
    await expect(failing).rejects.toThrow('roll back');
    await committing;
    expect(await ids()).toEqual(['kept']);
  });

  it('creates WAL segments without zero-filling them (a ~40 ms stall of the event loop each)', async () => {
    const { rows } = await sql<{ wal_init_zero: string }>`show wal_init_zero`.execute(database.db);
    expect(rows).toEqual([{ wal_init_zero: 'off' }]);
  });
});
