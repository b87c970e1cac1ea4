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
      /** Longest wait for a connection, new or from the pool (default `CONNECT_TIMEOUT_MS`). */
      connectTimeoutMs?: number;
      /** Server-side limit of one statement (default `STATEMENT_TIMEOUT_MS`); the client gives up `QUERY_TIMEOUT_MARGIN_MS` later. */
      statementTimeoutMs?: number;
    }
  | { kind: 'pglite'; dataDir: string };

/*
 * Time bounds on the request path. A request through the gateway has GATEWAY_RPC_TIMEOUT_MS
 * (default 5 s) per call; a query must fail before that, so the service answers UNAVAILABLE
 * itself (and frees its connection) rather than leaving the caller to its deadline:
 * - connecting, or waiting for a pooled connection, gives up after 2 s
 *   ("timeout exceeded when trying to connect", or "Connection terminated due to connection
 *   timeout" when the server accepts and never answers);
 * - a slow statement is cancelled by the server after 4 s (SQLSTATE 57014), keeping its
 *   connection;
 * - a server that does not answer at all (a blackholed network, a failover whose old
 *   connections are never reset) is given up by the client 0.5 s later ("Query read timeout"),
 *   and that connection is dropped (see `DroppingClient`).
 * All of these are dependency failures (errors.ts) and answer 503 + Retry-After.
 * Migrations are exempt (see `migrate`).
 */
const CONNECT_TIMEOUT_MS = 2_000;
const STATEMENT_TIMEOUT_MS = 4_000;
const QUERY_TIMEOUT_MARGIN_MS = 500;

/**
 * A pg client that closes its connection when a query times out on the client side
 * (`query_timeout`). pg gives up on such a query but leaves it in flight on the connection,
 * so every later query on it would wait behind an answer that may never come — after a
 * failover, until the kernel gives up on the socket, many minutes later.
 */
class DroppingClient extends pg.Client {
  // biome-ignore lint/suspicious/noExplicitAny: query() has a dozen overloads, all passed through unchanged
  override query(...args: any[]): any {
    const query = super.query as (...a: unknown[]) => unknown;
    const last = args.at(-1);
    if (typeof last === 'function') {
      args[args.length - 1] = (err: unknown, result: unknown) => {
        this.#dropIfTimedOut(err);
        last(err, result);
      };
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    return result instanceof Promise
      ? result.catch((err: unknown) => {
          this.#dropIfTimedOut(err);
          throw err;
        })
      : result;
  }

  #dropIfTimedOut(err: unknown): void {
    if ((err as Error | undefined)?.message !== 'Query read timeout') return;
    // end() marks the client as ending at once, so the pool discards it when it is released
    // (which happens before the socket's close event); destroy() frees the socket now rather
    // than after a Terminate message the server may never receive.
    this.end().catch(() => {});
    this.connection.stream.destroy();
  }
}

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
   * Answers the rows the statement affected (`rowCount`, as the driver reports it).
   */
  readonly prepared:
    | ((name: string, text: string, values: unknown[]) => Promise<{ rowCount: number | null }>)
    | undefined;
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
    const pool = postgresPool(config, schema, logger, 'requests');
    root = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    prepared = async (name, text, values) => {
      const { rowCount } = await pool.query({ name, text, values });
      return { rowCount };
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
      // Not bound by the request path's timeouts: an index build, or waiting for another
      // replica's migration lock, may rightly take longer than any request.
      const target =
        config.kind === 'postgres'
          ? new Kysely<DB>({
              dialect: new PostgresDialect({ pool: postgresPool(config, schema, logger, 'migrations') }),
            })
          : root;
      try {
        await createSchema(target, schema);
        const migrator = new Migrator({
          db: target.withSchema(schema),
          provider: { getMigrations: async () => migrations },
          migrationTableSchema: schema,
        });
        const { error, results } = await migrator.migrateToLatest();
        if (error) throw error;
        return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
      } finally {
        if (target !== root) await target.destroy();
      }
    },
    destroy: () => root.destroy(),
  };
}

/**
 * The pg pool of a service: for `requests`, bounded in time as described above; for
 * `migrations`, one connection without statement or query timeouts.
 */
function postgresPool(
  config: Extract<DatabaseConfig, { kind: 'postgres' }>,
  schema: string,
  logger: Logger,
  use: 'requests' | 'migrations',
): pg.Pool {
  const statementTimeoutMs = config.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: config.url,
    connectionTimeoutMillis: config.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
    keepAlive: true,
    application_name: `relayplane-${schema}`,
    ...(use === 'requests'
      ? {
          Client: DroppingClient,
          max: config.poolMax ?? 10,
          statement_timeout: statementTimeoutMs,
          query_timeout: statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
          idleTimeoutMillis: 30_000,
        }
      : { max: 1 }),
  });
  // Idle clients report a lost server on the pool; checked-out ones on themselves. Without a
  // listener either would crash the process (the query in flight fails on its own).
  pool.on('error', (err) => logger.warn({ err: { message: err.message } }, 'postgres connection lost'));
  pool.on('connect', (client) => {
    client.on('error', (err) => logger.warn({ err: { message: err.message } }, 'postgres connection lost'));
  });
  return pool;
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
