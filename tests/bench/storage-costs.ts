/**
 * What one issued credential costs the shared state, for the capacity model (docs/capacity.md):
 * Redis commands, network bytes and memory, PostgreSQL transactions, rows, WAL bytes and table
 * bytes, each counted by the servers themselves around a steady load, and PostgreSQL's commit
 * latency on this machine (a single-row INSERT in its own transaction, from one client).
 * WAL is attributed to the bench's database with pg_walinspect when the server has it.
 *
 * Counts, not rates: they do not depend on how fast the machine is, only on what the code does
 * (a batch of credentials shares one Redis script run and one INSERT, so the figures per
 * credential fall as the load grows; they are taken at the load the caller chose). WAL and
 * Redis's counters are server-wide: anything else writing to this PostgreSQL or Redis during the
 * measurement is counted too, so the bench's machine should be quiet.
 */
import { Redis } from 'ioredis';
import pg from 'pg';

export interface StorageCosts {
  credentials: number;
  redis: {
    commands_per_credential: number;
    /** The commands Redis executed most, per credential (INFO commandstats: commands a script calls count too). */
    top_commands_per_credential: Record<string, number>;
    net_input_bytes_per_credential: number;
    net_output_bytes_per_credential: number;
  };
  postgres: {
    transactions_per_credential: number;
    rows_written_per_credential: number;
    wal_bytes_per_credential: number;
    /**
     * `database`: only the WAL records of the bench's database (pg_walinspect: records touching its
     * relations, and the commit records of their transactions); `server`: the whole server's WAL
     * (the extension is not there), which counts whatever else wrote meanwhile.
     */
    wal_scope: 'database' | 'server';
    /** Heap, indexes and TOAST of `issuer.credentials`, divided by its rows. */
    credential_row_bytes: number;
    commit_latency_ms: { p50: number; p99: number; mean: number };
  };
}

interface RedisCounters {
  commands: number;
  netIn: number;
  netOut: number;
  perCommand: Map<string, number>;
}

async function redisCounters(redis: Redis): Promise<RedisCounters> {
  const stats = await redis.info('stats');
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
  const perCommand = new Map<string, number>();
  for (const line of (await redis.info('commandstats')).split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (m?.[1] && m[2]) perCommand.set(m[1], Number(m[2]));
  }
  return {
    commands: field('total_commands_processed'),
    netIn: field('total_net_input_bytes'),
    netOut: field('total_net_output_bytes'),
    perCommand,
  };
}

interface PgCounters {
  commits: number;
  rowsWritten: number;
  lsn: string;
  credentials: number;
}

async function pgCounters(db: pg.Client): Promise<PgCounters> {
  const { rows } = await db.query(
    `select xact_commit::bigint as commits, (tup_inserted + tup_updated + tup_deleted)::bigint as rows,
            pg_current_wal_flush_lsn()::text as lsn, (select count(*) from issuer.credentials)::bigint as credentials
       from pg_stat_database where datname = current_database()`,
  );
  const row = rows[0];
  return {
    commits: Number(row.commits),
    rowsWritten: Number(row.rows),
    lsn: row.lsn,
    credentials: Number(row.credentials),
  };
}

/**
 * pg_stat_database counts what backends have reported: a busy backend reports at most once a
 * second, an idle one within 10 s (PostgreSQL 15's PGSTAT_IDLE_INTERVAL). This waits for the
 * services' backends to report what they did before a snapshot.
 */
async function settle(db: pg.Client): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 11_000));
  await db.query('select pg_stat_clear_snapshot()');
}

/**
 * WAL bytes between two flushed LSNs (pg_walinspect reads only flushed WAL; every commit the
 * services waited for is flushed): this database's records if pg_walinspect is there, else the
 * server's.
 */
async function walBytes(
  db: pg.Client,
  from: string,
  to: string,
): Promise<{ bytes: number; scope: 'database' | 'server' }> {
  try {
    const { rows } = await db.query(
      `with records as (
         select xid, resource_manager, record_length, block_ref from pg_get_wal_records_info($1, $2)
       ), ours as (
         select distinct xid from records
          where block_ref like '%/' || (select oid from pg_database where datname = current_database()) || '/%'
       )
       select coalesce(sum(record_length), 0)::bigint as bytes from records
        where block_ref like '%/' || (select oid from pg_database where datname = current_database()) || '/%'
           or (resource_manager = 'Transaction' and xid in (select xid from ours))`,
      [from, to],
    );
    return { bytes: Number(rows[0].bytes), scope: 'database' };
  } catch (err) {
    console.warn(`WAL counted server-wide: pg_walinspect answered ${(err as Error).message}`);
    const { rows } = await db.query('select pg_wal_lsn_diff($1, $2)::bigint as bytes', [to, from]);
    return { bytes: Number(rows[0].bytes), scope: 'server' };
  }
}

/**
 * Counts this database's WAL from `from` on, a second at a time: a busy server recycles its WAL
 * segments within seconds (seen here while other suites ran), and pg_walinspect can only read
 * the segments still there. Falls back to the server-wide difference on the first failure.
 */
function walCounter(databaseUrl: string, from: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  let last = from;
  let bytes = 0;
  let scope: 'database' | 'server' = 'database';
  let running = true;
  const step = async (to: string) => {
    // pg_walinspect refuses a range that starts at the flush position (nothing written since).
    if (scope === 'server' || to === last) return;
    const counted = await walBytes(client, last, to);
    if (counted.scope === 'server') scope = 'server';
    else {
      bytes += counted.bytes;
      last = to;
    }
  };
  const loop = (async () => {
    await client.connect();
    while (running) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      if (!running) break;
      const { rows } = await client.query('select pg_current_wal_flush_lsn()::text as lsn');
      await step(rows[0].lsn);
    }
  })();
  return {
    async stop(to: string): Promise<{ bytes: number; scope: 'database' | 'server' }> {
      running = false;
      await loop;
      await step(to);
      if (scope === 'server') {
        const { rows } = await client.query('select pg_wal_lsn_diff($1, $2)::bigint as bytes', [to, from]);
        bytes = Number(rows[0].bytes);
      }
      await client.end();
      return { bytes, scope };
    },
  };
}

/** Median, 99th percentile and mean of `samples`, rounded to 0.01 ms. */
function summary(samples: number[]): { p50: number; p99: number; mean: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const round = (x: number) => Math.round(x * 100) / 100;
  return {
    p50: round(at(0.5)),
    p99: round(at(0.99)),
    mean: round(sorted.reduce((sum, x) => sum + x, 0) / Math.max(1, sorted.length)),
  };
}

/**
 * Commit latency of this PostgreSQL: `count` single-row INSERTs, each its own transaction
 * (synchronous_commit as the server has it), timed from one client, in a scratch table.
 */
async function commitLatency(
  db: pg.Client,
  count = 300,
): Promise<{ p50: number; p99: number; mean: number }> {
  // A regular table: a temporary one writes no WAL, so its commits would not wait for a flush.
  await db.query('create table bench_commit_probe (id bigint, at timestamptz)');
  const samples: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const start = performance.now();
      await db.query('insert into bench_commit_probe values ($1, now())', [i]);
      samples.push(performance.now() - start);
    }
  } finally {
    await db.query('drop table bench_commit_probe');
  }
  return summary(samples);
}

/**
 * Runs `load` (a steady issuance load) and counts what Redis and PostgreSQL did meanwhile,
 * divided by the credentials the `issuer.credentials` table gained.
 */
export async function measureStorageCosts(
  databaseUrl: string,
  redisUrl: string,
  load: () => Promise<unknown>,
): Promise<StorageCosts> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  // The bench's database is its own and dropped at the end; without the extension (or the right
  // to create it) WAL is counted server-wide.
  await db.query('create extension if not exists pg_walinspect').catch(() => undefined);
  try {
    await settle(db);
    const pg0 = await pgCounters(db);
    const wal = walCounter(databaseUrl, pg0.lsn);
    const redis0 = await redisCounters(redis);
    await load();
    await settle(db);
    const redis1 = await redisCounters(redis);
    const pg1 = await pgCounters(db);
    const walTotal = await wal.stop(pg1.lsn);
    const credentials = pg1.credentials - pg0.credentials;
    if (credentials <= 0) throw new Error('no credential was recorded during the storage-cost load');
    const per = (x: number, digits = 2) => +(x / credentials).toFixed(digits);
    // Our own INFO calls are commands too: two per snapshot.
    const commands = redis1.commands - redis0.commands - 4;
    const top = [...redis1.perCommand]
      .map(([name, calls]) => [name, calls - (redis0.perCommand.get(name) ?? 0)] as const)
      .filter(([name, calls]) => calls > 0 && name !== 'info')
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8);
    const size = await db.query(
      `select pg_total_relation_size('issuer.credentials')::bigint as bytes, (select count(*) from issuer.credentials)::bigint as n`,
    );
    const latency = await commitLatency(db);
    return {
      credentials,
      redis: {
        commands_per_credential: per(commands),
        top_commands_per_credential: Object.fromEntries(top.map(([name, calls]) => [name, per(calls, 3)])),
        net_input_bytes_per_credential: per(redis1.netIn - redis0.netIn, 0),
        net_output_bytes_per_credential: per(redis1.netOut - redis0.netOut, 0),
      },
      postgres: {
        // Our own snapshot queries are transactions too: two per snapshot.
        transactions_per_credential: per(pg1.commits - pg0.commits - 4, 3),
        rows_written_per_credential: per(pg1.rowsWritten - pg0.rowsWritten),
        wal_bytes_per_credential: per(walTotal.bytes, 0),
        wal_scope: walTotal.scope,
        credential_row_bytes: Math.round(Number(size.rows[0].bytes) / Math.max(1, Number(size.rows[0].n))),
        commit_latency_ms: latency,
      },
    };
  } finally {
    redis.disconnect();
    await db.end();
  }
}
