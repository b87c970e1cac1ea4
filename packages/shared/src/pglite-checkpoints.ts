/**
 * Checkpoints for PGlite (embedded mode), which runs PostgreSQL as a single-user backend with no
 * checkpointer process: left alone it never checkpoints while it is open (measured: 1.1 GB of
 * WAL over 1.8 million credentials, not one checkpoint). Until one runs, no WAL segment can be
 * removed, so `pg_wal` grows with every write for the life of the process, and a process that
 * is killed replays all of it at its next start. Here the service does the checkpointer's job,
 * on PostgreSQL's own settings: a checkpoint once the WAL written since the last one reaches
 * `max_wal_size / (1 + checkpoint_completion_target)` (PostgreSQL's trigger; ≈ 539 MB with its
 * defaults), or `checkpoint_timeout` (5 min) after the last one if anything was written since.
 *
 * A checkpoint in PGlite runs on the event loop, like every statement: it writes the dirty pages
 * of the shared buffers (at most `shared_buffers`, 128 MB) and holds everything else up while it
 * does. Measured at 5,000 credentials/s: 19–60 ms every 10 s of writes, 44–85 ms every 30 s,
 * 73–101 ms every 60 s (docs/performance.md). Fewer, larger checkpoints cost less in all (hot
 * pages are written once per checkpoint, not once per short interval), which is why the
 * thresholds are PostgreSQL's and not smaller. A clean close (`destroy`) checkpoints anyway.
 */
import { type Kysely, sql } from 'kysely';
import type { Logger } from './logger.ts';

/** How often the WAL written since the last checkpoint is looked at. */
export const CHECKPOINT_CHECK_MS = 10_000;

export interface CheckpointOptions {
  /** How often to look (default `CHECKPOINT_CHECK_MS`). */
  checkMs?: number;
  /** WAL since the last checkpoint's redo point that starts one (default: PostgreSQL's trigger). */
  walBytes?: number;
  /** Longest time between checkpoints while anything is written (default: `checkpoint_timeout`). */
  timeoutMs?: number;
}

export interface Checkpoints {
  /** The thresholds in force. */
  readonly walBytes: number;
  readonly timeoutMs: number;
  /** Stops looking; waits for a checkpoint under way. */
  stop(): Promise<void>;
}

interface WalPosition {
  /** The WAL insert position. */
  lsn: string;
  /** Bytes of WAL since the last checkpoint's redo point. */
  since: number;
}

export async function startCheckpoints<DB>(
  db: Kysely<DB>,
  logger: Logger,
  options: CheckpointOptions = {},
): Promise<Checkpoints> {
  const { rows } = await sql<{ name: string; setting: string; unit: string | null }>`
    select name, setting, unit from pg_settings
     where name in ('max_wal_size', 'checkpoint_timeout', 'checkpoint_completion_target')`.execute(db);
  const setting = (name: string, unit: string | null): number => {
    const row = rows.find((r) => r.name === name);
    const value = Number(row?.setting);
    if (!row || row.unit !== unit || !Number.isFinite(value)) {
      throw new Error(
        `PGlite setting ${name}: expected a number in ${unit ?? 'no unit'}, got ${JSON.stringify(row)}`,
      );
    }
    return value;
  };
  const walBytes =
    options.walBytes ??
    Math.floor(
      (setting('max_wal_size', 'MB') * 1024 * 1024) / (1 + setting('checkpoint_completion_target', null)),
    );
  const timeoutMs = options.timeoutMs ?? setting('checkpoint_timeout', 's') * 1000;
  const checkMs = options.checkMs ?? CHECKPOINT_CHECK_MS;

  const position = async (): Promise<WalPosition> => {
    const { rows } = await sql<WalPosition>`
      select pg_current_wal_insert_lsn()::text as lsn,
             pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::float8 as since
        from pg_control_checkpoint()`.execute(db);
    const [row] = rows;
    if (!row) throw new Error('pg_control_checkpoint() answered no row');
    return row;
  };

  // Where the WAL stood after the last checkpoint (or at the start), and when.
  let last = { lsn: (await position()).lsn, at: performance.now() };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  const check = async (): Promise<void> => {
    const now = await position();
    const cause =
      now.since >= walBytes
        ? 'wal'
        : now.lsn !== last.lsn && performance.now() - last.at >= timeoutMs
          ? 'time'
          : undefined;
    if (!cause) return;
    const started = performance.now();
    await sql`checkpoint`.execute(db);
    const ms = performance.now() - started;
    last = { lsn: (await position()).lsn, at: performance.now() };
    logger.info({ cause, walBytes: now.since, ms: Math.round(ms * 10) / 10 }, 'pglite checkpoint');
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = check()
        .catch((err: unknown) => {
          // A failed checkpoint (a full disk) is PostgreSQL's to report on the next write; the
          // next look tries again.
          if (!stopped) logger.warn({ err }, 'pglite checkpoint failed');
        })
        .finally(() => {
          running = undefined;
          schedule();
        });
    }, checkMs);
    timer.unref();
  };
  schedule();

  return {
    walBytes,
    timeoutMs,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
