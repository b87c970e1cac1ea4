/**
 * Database factory. Distributed mode talks to PostgreSQL through a pg pool; embedded mode
 * runs PGlite (Postgres compiled to WASM) in the process. Either way each service lives in
 * its own Postgres schema and applies its own kysely migrations.
 *
 * Behind a transaction pooler (PgBouncer with `pool_mode = transaction`), consecutive
 * transactions of one client run on different server connections, so nothing may rely on a
 * session: the URL says so with `pgbouncer=true` (see `TRANSACTION_POOLER_PARAM`), and then
 * - no startup parameter but the ones PgBouncer passes: the statement timeout is the role's
 *   default on the server (`ALTER ROLE … SET statement_timeout`), which `migrate` verifies;
 * - no named prepared statement (`prepared` runs its text unnamed);
 * and in every mode the migration lock is transaction-scoped, taken in the one transaction
 * that applies the migrations (kysely's own is a session lock, held across transactions).
 * Every other advisory lock in the apps is `pg_advisory_xact_lock`, every `set_config` local,
 * and nothing LISTENs, so no app needs a direct connection (deploy/README.md, PgBouncer).
 */
import { mkdirSync } from 'node:fs';
import { Kysely, PGliteDialect, PostgresAdapter, PostgresDialect, type RawBuilder, sql } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import pg from 'pg';
import { ConfigError } from './config-error.ts';
import { createLogger, type Logger } from './logger.ts';
import { type CheckpointOptions, type Checkpoints, startCheckpoints } from './pglite-checkpoints.ts';
import { endSpan, isRecording, isTracingEnabled, type Span, SpanKind, startChildSpan } from './tracing.ts';

export type DatabaseConfig =
  | {
      kind: 'postgres';
      url: string;
      poolMax?: number;
      /** Longest wait for a connection, new or from the pool (default `CONNECT_TIMEOUT_MS`). */
      connectTimeoutMs?: number;
      /**
       * Server-side limit of one statement (default `STATEMENT_TIMEOUT_MS`); the client gives up
       * `QUERY_TIMEOUT_MARGIN_MS` later. Sent when connecting, or, behind a transaction pooler,
       * the most the role's default may be.
       */
      statementTimeoutMs?: number;
    }
  | {
      kind: 'pglite';
      dataDir: string;
      /** PGlite has no checkpointer; the service checkpoints (`pglite-checkpoints.ts`). */
      checkpoints?: CheckpointOptions;
    };

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
 * The URL query parameter saying the URL reaches PostgreSQL through a pooler in transaction
 * mode (`?pgbouncer=true`, as Prisma spells it; any such pooler). Read and removed here: pg
 * would ignore it and PostgreSQL never sees it.
 */
const TRANSACTION_POOLER_PARAM = 'pgbouncer';

/** The URL as pg should get it, and whether it goes through a transaction pooler. */
export function parseDatabaseUrl(url: string, variable: string): { url: string; transactionPooler: boolean } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Not a URL the WHATWG parser takes (pg has its own parser): then it carries no parameter of ours.
    return { url, transactionPooler: false };
  }
  const value = parsed.searchParams.get(TRANSACTION_POOLER_PARAM);
  if (value === null) return { url, transactionPooler: false };
  if (value !== 'true' && value !== 'false') {
    throw new ConfigError(variable, `${TRANSACTION_POOLER_PARAM}= must be true or false, not "${value}"`);
  }
  parsed.searchParams.delete(TRANSACTION_POOLER_PARAM);
  return { url: parsed.toString(), transactionPooler: value === 'true' };
}

/**
 * kysely's migration lock id. Kept so that a replica of an older release, which takes it as a
 * session lock, and this one, which takes it per transaction, still exclude each other (both
 * kinds of advisory lock on one id conflict).
 */
const MIGRATION_LOCK_ID = BigInt('3853314791062309107');

/**
 * kysely's PostgreSQL adapter with the migration lock held by the migrating transaction and
 * released by its commit or rollback. kysely's own is a session lock released by a statement
 * after the transaction: behind a transaction pooler that statement may run on another server
 * connection, and a lock left on a pooled connection would block every later migration.
 */
class TransactionLockAdapter extends PostgresAdapter {
  // biome-ignore lint/suspicious/noExplicitAny: the adapter's contract is an untyped Kysely
  override async acquireMigrationLock(db: Kysely<any>): Promise<void> {
    await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(db);
  }

  override async releaseMigrationLock(): Promise<void> {}
}

class MigrationDialect extends PostgresDialect {
  override createAdapter(): PostgresAdapter {
    return new TransactionLockAdapter();
  }
}

/** The statement's first keyword (`SELECT`, `INSERT`, `BEGIN`, …): what a span may say of it. */
export function statementKind(text: unknown): string {
  if (typeof text !== 'string') return 'OTHER';
  const m = /^\s*(?:\/\*[\s\S]*?\*\/\s*|--[^\n]*\n\s*)*\(?\s*([A-Za-z]{1,20})\b/.exec(text);
  return m ? (m[1] as string).toUpperCase() : 'OTHER';
}

/**
 * A pg client that closes its connection when a query times out on the client side
 * (`query_timeout`). pg gives up on such a query but leaves it in flight on the connection,
 * so every later query on it would wait behind an answer that may never come — after a
 * failover, until the kernel gives up on the socket, many minutes later.
 *
 * Every query of the request pools goes through here, so it is also where PostgreSQL spans are
 * made (tracing.ts, under a recorded span only): the statement kind and, for a named prepared
 * statement, its name; never the text or the values.
 */
class DroppingClient extends pg.Client {
  // biome-ignore lint/suspicious/noExplicitAny: query() has a dozen overloads, all passed through unchanged
  override query(...args: any[]): any {
    const query = super.query as (...a: unknown[]) => unknown;
    const span = isTracingEnabled() ? this.#span(args[0]) : undefined;
    const last = args.at(-1);
    if (typeof last === 'function') {
      args[args.length - 1] = (err: unknown, result: unknown) => {
        this.#dropIfTimedOut(err);
        if (span) endSpan(span, err ?? undefined);
        last(err, result);
      };
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    if (!(result instanceof Promise)) {
      if (span) endSpan(span);
      return result;
    }
    return result.then(
      (value: unknown) => {
        if (span) endSpan(span);
        return value;
      },
      (err: unknown) => {
        this.#dropIfTimedOut(err);
        if (span) endSpan(span, err);
        throw err;
      },
    );
  }

  #span(first: unknown): Span | undefined {
    if (!isRecording()) return undefined;
    // A Submittable (a cursor) reports through events of its own: not traced.
    if (
      first !== null &&
      typeof first === 'object' &&
      typeof (first as { submit?: unknown }).submit === 'function'
    ) {
      return undefined;
    }
    const statement =
      typeof first === 'string'
        ? { text: first, name: undefined }
        : (first as { text?: unknown; name?: unknown });
    const kind = statementKind(statement?.text);
    const name = typeof statement?.name === 'string' ? statement.name : undefined;
    const summary = name ? `${kind} ${name}` : kind;
    const span = startChildSpan(summary, SpanKind.CLIENT);
    if (!span) return undefined;
    span.setAttribute('db.system.name', 'postgresql');
    span.setAttribute('db.operation.name', kind);
    span.setAttribute('db.query.summary', summary);
    if (this.database) span.setAttribute('db.namespace', this.database);
    return span;
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
   * Behind a transaction pooler it runs unnamed (parsed and planned every call), since the
   * server connection that prepared it is not the one the next call gets.
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
  // The service's own URL variable (schemas are named after the services), as readDatabase names it.
  const variable = `${schema.toUpperCase()}_DATABASE_URL`;
  let target: ReturnType<typeof parseDatabaseUrl> | undefined;
  let checkpoints: Checkpoints | undefined;
  if (config.kind === 'postgres') {
    target = parseDatabaseUrl(config.url, variable);
    const pool = postgresPool(config, target, schema, logger, 'requests');
    root = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    prepared = target.transactionPooler
      ? // A named statement lives on one server connection; the next call may get another.
        async (_name, text, values) => {
          const { rowCount } = await pool.query({ text, values });
          return { rowCount };
        }
      : async (name, text, values) => {
          const { rowCount } = await pool.query({ name, text, values });
          return { rowCount };
        };
  } else {
    mkdirSync(config.dataDir, { recursive: true });
    const { PGlite } = await import('@electric-sql/pglite');
    const pglite = await PGlite.create({ dataDir: config.dataDir });
    // A new 16 MB WAL segment is not filled with zeros first: PGlite runs PostgreSQL on the event
    // loop, and zero-filling one through its file system stalled every request for ~40 ms about
    // every 2–3 s of steady issuance (docs/performance.md, "The embedded mode"). What the zeros
    // buy on a plain file system, the space reserved before WAL is written, is no safer here: a
    // full disk fails the write either way.
    await pglite.exec('SET wal_init_zero = off');
    root = new Kysely<DB>({ dialect: new PGliteDialect({ pglite }) });
    checkpoints = await startCheckpoints(root, logger, config.checkpoints);
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
      if (config.kind === 'postgres' && target?.transactionPooler) {
        await verifyStatementTimeout(root, config.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS, variable);
      }
      const apply = async (db: Kysely<DB>) => {
        const migrator = new Migrator({
          db: db.withSchema(schema),
          provider: { getMigrations: async () => migrations },
          migrationTableSchema: schema,
        });
        const { error, results } = await migrator.migrateToLatest();
        if (error) throw error;
        return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
      };
      if (config.kind !== 'postgres' || !target) {
        await createSchema(root, schema);
        return apply(root);
      }
      const migrating = new Kysely<DB>({
        dialect: new MigrationDialect({ pool: postgresPool(config, target, schema, logger, 'migrations') }),
      });
      try {
        await createSchema(migrating, schema);
        // One transaction, on one server connection whatever pools in between: the lock first
        // (so replicas do not race on kysely's tables either), then every pending migration;
        // a failure rolls all of them back and frees the lock.
        return await migrating.transaction().execute(async (trx) => {
          // Not bound by the request path's timeouts (nor a role default meant for them): an
          // index build, or waiting for another replica's lock, may rightly take longer.
          await sql`set local statement_timeout = 0`.execute(trx);
          await new TransactionLockAdapter().acquireMigrationLock(trx);
          return apply(trx);
        });
      } finally {
        await migrating.destroy();
      }
    },
    async destroy() {
      await checkpoints?.stop();
      await root.destroy();
    },
  };
}

/**
 * Behind a transaction pooler the statement timeout cannot be sent when connecting (PgBouncer
 * refuses the startup parameter), and a `SET` would stay on a server connection other clients
 * get next. So it is the role's default on the server, applied by PostgreSQL to every session
 * PgBouncer opens, at no cost per statement; this checks it is there before the service starts
 * (`migrate`, also the `migrate` command): none, or one longer than `maxMs` (the client would
 * give up first and drop its connection), is a configuration error.
 */
async function verifyStatementTimeout<DB>(root: Kysely<DB>, maxMs: number, variable: string): Promise<void> {
  const { rows } = await sql<{ ms: string; role: string; database: string }>`
    select setting as ms, current_user as role, current_database() as database
      from pg_settings where name = 'statement_timeout'`.execute(root);
  const row = rows[0];
  const ms = Number(row?.ms);
  if (ms > 0 && ms <= maxMs) return;
  const role = String(row?.role).replaceAll('"', '""');
  const database = String(row?.database).replaceAll('"', '""');
  throw new ConfigError(
    variable,
    `goes through a transaction pooler (${TRANSACTION_POOLER_PARAM}=true), so PostgreSQL must apply the ` +
      `statement timeout itself: the role's statement_timeout is ${ms > 0 ? `${ms} ms` : 'not set'}, expected ` +
      `1 to ${maxMs} ms. Run ALTER ROLE "${role}" IN DATABASE "${database}" SET statement_timeout = '${maxMs}ms' ` +
      `and let the pooler open new server connections (PgBouncer: RECONNECT)`,
  );
}

/**
 * The pg pool of a service: for `requests`, bounded in time as described above; for
 * `migrations`, one connection without statement or query timeouts. Behind a transaction
 * pooler nothing is sent when connecting but what PgBouncer passes on (application_name):
 * the role's default bounds statements instead (`verifyStatementTimeout`).
 */
function postgresPool(
  config: Extract<DatabaseConfig, { kind: 'postgres' }>,
  target: { url: string; transactionPooler: boolean },
  schema: string,
  logger: Logger,
  use: 'requests' | 'migrations',
): pg.Pool {
  const statementTimeoutMs = config.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: target.url,
    connectionTimeoutMillis: config.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
    keepAlive: true,
    application_name: `relayplane-${schema}`,
    ...(use === 'requests'
      ? {
          Client: DroppingClient,
          max: config.poolMax ?? 10,
          ...(target.transactionPooler ? {} : { statement_timeout: statementTimeoutMs }),
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
