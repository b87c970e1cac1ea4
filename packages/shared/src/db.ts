/**
 * Database factory. Distributed mode talks to PostgreSQL through a pg pool; embedded mode
 * runs PGlite (Postgres compiled to WASM) in the process. Either way each service lives in
 * its own Postgres schema and applies its own kysely migrations.
 */
import { mkdirSync } from 'node:fs';
import { Kysely, PGliteDialect, PostgresDialect, type RawBuilder, sql } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import pg from 'pg';
import { createLogger, type Logger } from './logger.ts';

export type DatabaseConfig =
  | {
      kind: 'postgres';
      url: string;
      poolMax?: number;
      connectTimeoutMs?: number;
      statementTimeoutMs?: number;
    }
  | { kind: 'pglite'; dataDir: string };

export interface Database<DB> {
  /** Queries are qualified with the service's schema. */
  readonly db: Kysely<DB>;
  readonly schema: string;
  /** True when the database answers within `timeoutMs`. */
  ping(timeoutMs?: number): Promise<boolean>;
  migrate(migrations: Record<string, Migration>): Promise<string[]>;
  /**
   * PostgreSQL only (undefined on PGlite): runs `text` as a named prepared statement, parsed and
   * planned once per pooled connection instead of once per call. For the few hot statements.
   */
  readonly prepared: ((name: string, text: string, values: unknown[]) => Promise<void>) | undefined;
  destroy(): Promise<void>;
}

const SCHEMA_PATTERN = /^[a-z][a-z0-9_]{0,62}$/;

export async function createDatabase<DB>(
  config: DatabaseConfig,
  schema: string,
  logger: Logger,
): Promise<Database<DB>> {
  if (!SCHEMA_PATTERN.test(schema)) throw new Error(`invalid schema name ${schema}`);
  let root: Kysely<DB>;
  let prepared: Database<DB>['prepared'];
  if (config.kind === 'postgres') {
    const pool = new pg.Pool({
      connectionString: config.url,
      max: config.poolMax ?? 10,
      connectionTimeoutMillis: config.connectTimeoutMs ?? 2_000,
      // A blackholed server must surface as an error, not as a request that hangs forever.
      query_timeout: config.statementTimeoutMs ?? 10_000,
      statement_timeout: config.statementTimeoutMs ?? 10_000,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
      application_name: `relayplane-${schema}`,
    });
    // Idle clients report a lost server on the pool; checked-out ones on themselves. Without a
    // listener either would crash the process (the query in flight fails on its own).
    pool.on('error', (err) => logger.warn({ err: { message: err.message } }, 'postgres connection lost'));
    pool.on('connect', (client) => {
      client.on('error', (err) => logger.warn({ err: { message: err.message } }, 'postgres connection lost'));
    });
    root = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    prepared = async (name, text, values) => {
      await pool.query({ name, text, values });
    };
  } else {
    mkdirSync(config.dataDir, { recursive: true });
    const { PGlite } = await import('@electric-sql/pglite');
    const pglite = await PGlite.create({ dataDir: config.dataDir });
    root = new Kysely<DB>({ dialect: new PGliteDialect({ pglite }) });
  }
  const db = root.withSchema(schema);

  return {
    db,
    schema,
    prepared,
    async ping(timeoutMs = 1_000) {
      let timer: NodeJS.Timeout | undefined;
      try {
        return await Promise.race([
          sql`select 1`.execute(root).then(() => true),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(false), timeoutMs);
          }),
        ]);
      } catch {
        return false;
      } finally {
        clearTimeout(timer);
      }
    },
    async migrate(migrations) {
      await createSchema(root, schema);
      const migrator = new Migrator({
        db,
        provider: { getMigrations: async () => migrations },
        migrationTableSchema: schema,
      });
      const { error, results } = await migrator.migrateToLatest();
      if (error) throw error;
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    },
    destroy: () => root.destroy(),
  };
}

async function createSchema<DB>(db: Kysely<DB>, schema: string): Promise<void> {
  try {
    await sql`create schema if not exists ${sql.id(schema)}`.execute(db);
  } catch (err) {
    // Two replicas migrating at once can race on the catalog; the schema exists either way.
    if ((err as { code?: string }).code !== '23505') throw err;
  }
}

/**
 * A service's `migrate` command (what an operator runs before a rollout, and the images' migrate
 * job): applies the migrations of its schema, logs what it applied, and closes the connection.
 */
export async function runMigrations(
  service: string,
  config: { database: DatabaseConfig; logLevel: string },
  migrations: Record<string, Migration>,
): Promise<void> {
  const logger = createLogger({ level: config.logLevel, service });
  const database = await createDatabase(config.database, service, logger);
  try {
    const applied = await database.migrate(migrations);
    logger.info({ applied }, applied.length ? 'migrations applied' : 'schema up to date');
  } finally {
    await database.destroy();
  }
}

/**
 * `'a', 'b', …` for a check constraint over values contract.ts owns (roles, key modes,
 * environments), so a migration does not spell them a second time. A migration that changes
 * such a set replaces the constraint itself; a fresh database runs both and ends the same.
 */
export function literalList(values: readonly string[]): RawBuilder<unknown> {
  return sql.join(values.map((value) => sql.lit(value)));
}
