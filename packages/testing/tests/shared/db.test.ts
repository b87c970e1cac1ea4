import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, type Database, type DatabaseConfig } from '@relayplane/shared/db';
import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { createTestDatabase, type TestDatabase } from '../../src/storage.ts';

const logger = testLogger('db');

interface Tables {
  widgets: { id: string; label: string };
  gadgets: { id: string };
}

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped database
type AnyDb = Kysely<any>;

const MIGRATIONS: Record<string, Migration> = {
  '20260101T000000-widgets': {
    async up(db: AnyDb) {
      await db.schema
        .createTable('widgets')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('label', 'text', (c) => c.notNull())
        .execute();
    },
  },
  '20260102T000000-gadgets': {
    async up(db: AnyDb) {
      await db.schema
        .createTable('gadgets')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .execute();
    },
  },
};
const MIGRATION_NAMES = Object.keys(MIGRATIONS);

async function tablesBySchema(database: Database<Tables>): Promise<Record<string, string[]>> {
  const { rows } = await sql<{ table_schema: string; table_name: string }>`
    select table_schema, table_name from information_schema.tables
    where table_schema not in ('pg_catalog', 'information_schema')
    order by table_schema, table_name`.execute(database.db);
  const out: Record<string, string[]> = {};
  for (const r of rows) {
    out[r.table_schema] = [...(out[r.table_schema] ?? []), r.table_name];
  }
  return out;
}

interface Backend {
  name: string;
  setup(): Promise<DatabaseConfig>;
  teardown(): Promise<void>;
}

function databaseFactorySuite(backend: Backend): void {
  describe(`createDatabase: ${backend.name}`, () => {
    let config: DatabaseConfig;
    let database: Database<Tables>;

    beforeAll(async () => {
      config = await backend.setup();
      database = await createDatabase<Tables>(config, 'svc_alpha', logger);
    });

    afterAll(async () => {
      await database?.destroy();
      await backend.teardown();
    });

    it('applies every migration in name order and creates its tables in the service schema only', async () => {
      expect(await database.migrate(MIGRATIONS)).toEqual(MIGRATION_NAMES);
      const tables = await tablesBySchema(database);
      expect(tables).toEqual({
        svc_alpha: ['gadgets', 'kysely_migration', 'kysely_migration_lock', 'widgets'],
      });
    });

    it('applies nothing when migrating again', async () => {
      expect(await database.migrate(MIGRATIONS)).toEqual([]);
    });

    it('applies only a newly added migration on a later run', async () => {
      const more: Record<string, Migration> = {
        ...MIGRATIONS,
        '20260103T000000-widget-index': {
          async up(db: AnyDb) {
            await db.schema.createIndex('widgets_label').on('widgets').column('label').execute();
          },
        },
      };
      expect(await database.migrate(more)).toEqual(['20260103T000000-widget-index']);
    });

    it('qualifies queries with the service schema', async () => {
      await database.db.insertInto('widgets').values({ id: 'w1', label: 'first' }).execute();
      const rows = await database.db.selectFrom('widgets').selectAll().execute();
      expect(rows).toEqual([{ id: 'w1', label: 'first' }]);
      const { rows: raw } = await sql<{
        n: number;
      }>`select count(*)::int as n from svc_alpha.widgets`.execute(database.db);
      expect(raw[0]?.n).toBe(1);
    });

    it('keeps a second service in its own schema of the same database, with its own migration history', async () => {
      const other = await createDatabase<Tables>(config, 'svc_beta', logger);
      try {
        expect(await other.migrate(MIGRATIONS)).toEqual(MIGRATION_NAMES);
        expect(await other.db.selectFrom('widgets').selectAll().execute()).toEqual([]);
        const tables = await tablesBySchema(other);
        expect(Object.keys(tables).sort()).toEqual(['svc_alpha', 'svc_beta']);
        expect(tables.svc_beta).toEqual(['gadgets', 'kysely_migration', 'kysely_migration_lock', 'widgets']);
      } finally {
        await other.destroy();
      }
    });

    it('ping is true while the database answers', async () => {
      // A timeout far beyond an answer's time: a loaded machine answers `select 1` late, not never.
      expect(await database.ping(10_000)).toBe(true);
    });

    it('rejects a schema name that is not a plain lowercase identifier', async () => {
      for (const bad of ['Public', 'a-b', 'x;drop schema public', '1abc', '', 'a'.repeat(64)]) {
        await expect(createDatabase(config, bad, logger), bad).rejects.toThrow(/invalid schema name/);
      }
    });
  });
}

let pgDatabase: TestDatabase;
databaseFactorySuite({
  name: 'PostgreSQL',
  async setup() {
    pgDatabase = await createTestDatabase('db');
    return { kind: 'postgres', url: pgDatabase.url };
  },
  teardown: () => pgDatabase.drop(),
});

let pgliteDir: string;
databaseFactorySuite({
  name: 'PGlite',
  async setup() {
    pgliteDir = await mkdtemp(join(tmpdir(), 'relayplane-db-test-'));
    return { kind: 'pglite', dataDir: join(pgliteDir, 'data') };
  },
  teardown: () => rm(pgliteDir, { recursive: true, force: true }),
});

describe('createDatabase: PGlite persistence', () => {
  it('keeps data and migration history in its data directory across restarts', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'relayplane-db-test-'));
    try {
      const config: DatabaseConfig = { kind: 'pglite', dataDir: join(dir, 'data') };
      const first = await createDatabase<Tables>(config, 'svc', logger);
      expect(await first.migrate(MIGRATIONS)).toEqual(MIGRATION_NAMES);
      await first.db.insertInto('widgets').values({ id: 'w', label: 'kept' }).execute();
      await first.destroy();
      const second = await createDatabase<Tables>(config, 'svc', logger);
      try {
        expect(await second.migrate(MIGRATIONS)).toEqual([]);
        expect(await second.db.selectFrom('widgets').select('label').execute()).toEqual([{ label: 'kept' }]);
      } finally {
        await second.destroy();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    // Two PGlite starts (the first creating the data directory) are seconds of CPU: on a loaded
    // machine, more than the default 30 s.
  }, 120_000);
});

describe('createDatabase: PostgreSQL replicas and outages', () => {
  it('two replicas migrating the same fresh database at once both succeed and apply each migration once', async () => {
    const test = await createTestDatabase('dbrace');
    const config: DatabaseConfig = { kind: 'postgres', url: test.url };
    const replicas = await Promise.all([
      createDatabase<Tables>(config, 'svc_race', logger),
      createDatabase<Tables>(config, 'svc_race', logger),
      createDatabase<Tables>(config, 'svc_race', logger),
    ]);
    try {
      const applied = await Promise.all(replicas.map((r) => r.migrate(MIGRATIONS)));
      expect(applied.flat().sort()).toEqual(MIGRATION_NAMES);
      const { rows } = await sql<{
        name: string;
      }>`select name from svc_race.kysely_migration order by name`.execute(replicas[0]?.db as Kysely<Tables>);
      expect(rows.map((r) => r.name)).toEqual(MIGRATION_NAMES);
    } finally {
      await Promise.all(replicas.map((r) => r.destroy()));
      await test.drop();
    }
  });

  async function expectPingFalseWithin(url: string, timeoutMs: number): Promise<void> {
    // The connect timeout is far longer than the ping's, so only the ping's own timeout can end
    // it before the connect timeout does. How much later than its timeout the ping answers
    // depends on the machine's load (a stalled process answers late), so that is not the bound.
    const connectTimeoutMs = 10_000;
    const database = await createDatabase<Tables>({ kind: 'postgres', url, connectTimeoutMs }, 'svc', logger);
    try {
      const started = performance.now();
      const ok = await database.ping(timeoutMs);
      const elapsed = performance.now() - started;
      expect(ok).toBe(false);
      expect(elapsed).toBeLessThan(connectTimeoutMs / 2);
    } finally {
      await database.destroy();
    }
  }

  it('ping is false, without throwing, when nothing listens on the port', async () => {
    await expectPingFalseWithin('postgres://postgres@127.0.0.1:1/none', 300);
  });

  it('ping is false within its timeout, without throwing, when the server accepts and never answers', async () => {
    const sockets = new Set<Socket>();
    let accepted = 0;
    const blackhole: Server = createServer((socket) => {
      accepted++;
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
    const address = blackhole.address();
    if (address === null || typeof address === 'string') throw new Error('blackhole did not bind');
    try {
      await expectPingFalseWithin(`postgres://postgres@127.0.0.1:${address.port}/none`, 300);
      expect(accepted).toBeGreaterThanOrEqual(1);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => blackhole.close(() => resolve()));
    }
  });

  it('survives a connection reset while a client is checked out: the transaction fails, the process does not crash', async () => {
    const test = await createTestDatabase('dbreset');
    const target = new URL(test.url);
    const sockets = new Set<Socket>();
    const proxy: Server = createServer((client) => {
      const upstream = createConnection(Number(target.port || 5432), target.hostname);
      sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      client.on('error', () => {});
      upstream.on('error', () => {});
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const address = proxy.address();
    if (address === null || typeof address === 'string') throw new Error('proxy did not bind');
    const viaProxy = new URL(test.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(address.port);
    const database = await createDatabase<Tables>(
      { kind: 'postgres', url: viaProxy.toString() },
      'svc_reset',
      logger,
    );
    try {
      const transaction = database.db.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        // The connection is checked out and idle between statements when the server goes away.
        for (const socket of sockets) socket.resetAndDestroy();
        await new Promise((resolve) => setTimeout(resolve, 100));
        await sql`select 2`.execute(trx);
      });
      await expect(transaction).rejects.toThrow();
      expect(await database.ping(10_000)).toBe(true);
    } finally {
      await database.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      await test.drop();
    }
  });
});
