/**
 * Scheduler: periodic maintenance jobs that must run once per period across all replicas.
 * bullmq job schedulers in distributed mode, timers in embedded mode (one process).
 */
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from './logger.ts';
import { retryUntilDone } from './readiness.ts';
import { duplicateConnection, isCluster } from './redis.ts';

export type JobHandler = () => Promise<void>;

export interface Scheduler {
  /** Runs `handler` every `everyMs`; call before `start`. */
  every(name: string, everyMs: number, handler: JobHandler): void;
  /** Starts running the registered jobs; never waits for Redis (the jobs begin once it answers). */
  start(): Promise<void>;
  /** Runs a registered job as soon as possible, outside its schedule. */
  trigger(name: string): Promise<void>;
  close(): Promise<void>;
}

export class MemoryScheduler implements Scheduler {
  readonly #jobs = new Map<string, { everyMs: number; handler: JobHandler }>();
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #running = new Set<Promise<void>>();
  readonly #logger: Logger;
  #closed = false;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  every(name: string, everyMs: number, handler: JobHandler): void {
    this.#jobs.set(name, { everyMs, handler });
  }

  async start(): Promise<void> {
    for (const [name, job] of this.#jobs) {
      const timer = setInterval(() => this.#run(name), job.everyMs);
      timer.unref();
      this.#timers.push(timer);
    }
  }

  async trigger(name: string): Promise<void> {
    if (!this.#jobs.has(name)) throw new Error(`unknown job ${name}`);
    this.#run(name);
  }

  #run(name: string): void {
    const job = this.#jobs.get(name);
    if (!job || this.#closed) return;
    const p = job
      .handler()
      .catch((err: unknown) => this.#logger.error({ err, job: name }, 'scheduled job failed'))
      .finally(() => this.#running.delete(p));
    this.#running.add(p);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const t of this.#timers) clearInterval(t);
    await Promise.all(this.#running);
  }
}

/**
 * How often a started scheduler checks that its schedules still exist in Redis. A Redis that
 * lost its data (a flush, an empty restart, a failover to a replica that missed the writes)
 * loses them, and nothing else writes them again: key rotation, old-key removal and usage
 * aggregation would stop until a replica restarts. A check is one read per job.
 */
const SCHEDULE_CHECK_MS = 30_000;

export class BullmqScheduler implements Scheduler {
  readonly #jobs = new Map<string, { everyMs: number; handler: JobHandler }>();
  readonly #queueName: string;
  readonly #connection: Redis;
  readonly #prefix: string;
  readonly #logger: Logger;
  readonly #closing = new AbortController();
  /** Job runs in progress in this process. */
  readonly #running = new Set<Promise<void>>();
  #queue: Queue | undefined;
  #worker: Worker | undefined;
  #workerConnection: Redis | undefined;
  #lastError: string | undefined;
  #scheduleCheck: NodeJS.Timeout | undefined;

  readonly #scheduleCheckMs: number;

  /**
   * `connection` is duplicated for the worker (blocking commands need their own). On a Redis
   * Cluster `prefix` must carry a hash tag (`queuePrefix` in redis.ts): a queue's scripts touch
   * its keys together.
   */
  constructor(
    queueName: string,
    connection: Redis,
    prefix: string,
    logger: Logger,
    options: { scheduleCheckMs?: number } = {},
  ) {
    this.#scheduleCheckMs = options.scheduleCheckMs ?? SCHEDULE_CHECK_MS;
    this.#queueName = queueName;
    this.#connection = connection;
    this.#prefix = prefix;
    this.#logger = logger;
  }

  every(name: string, everyMs: number, handler: JobHandler): void {
    this.#jobs.set(name, { everyMs, handler });
  }

  /**
   * Never waits for Redis: the schedules are written in the background, retried until Redis
   * answers, and the worker picks jobs up once it is connected. A service started while Redis
   * is away thus starts (and serves what needs no Redis); its jobs begin when Redis returns.
   */
  async start(): Promise<void> {
    const queue = new Queue(this.#queueName, { connection: this.#connection, prefix: this.#prefix });
    this.#queue = queue;
    // Without a listener bullmq prints every connection error to the console.
    queue.on('error', (err) => this.#connectionError(err));
    retryUntilDone('writing the job schedules', () => this.#upsertSchedules(queue), {
      logger: this.#logger,
      signal: this.#closing.signal,
    })
      .then(() => {
        this.#scheduleCheck = setInterval(
          () => void this.#restoreLostSchedules(queue),
          this.#scheduleCheckMs,
        );
        this.#scheduleCheck.unref();
      })
      .catch(() => {}); // only close() ends the retries
    // bullmq never closes a connection it was handed, so this one is ours to close.
    this.#workerConnection = duplicateConnection(this.#connection, { maxRetriesPerRequest: null });
    this.#workerConnection.on('ready', () => {
      this.#lastError = undefined;
    });
    this.#worker = new Worker(
      this.#queueName,
      async (job) => {
        const entry = this.#jobs.get(job.name);
        if (!entry) return;
        const run = entry.handler();
        this.#running.add(run);
        try {
          await run;
        } finally {
          this.#running.delete(run);
        }
      },
      {
        connection: this.#workerConnection,
        prefix: this.#prefix,
        concurrency: 1,
      },
    );
    this.#worker.on('failed', (job, err) =>
      this.#logger.error({ err, job: job?.name }, 'scheduled job failed'),
    );
    this.#worker.on('error', (err) => this.#connectionError(err));
  }

  async #upsertSchedules(queue: Queue): Promise<void> {
    for (const [name, job] of this.#jobs) {
      // Upserting the same scheduler id from every replica keeps exactly one schedule.
      await queue.upsertJobScheduler(
        name,
        { every: job.everyMs },
        { name, opts: { removeOnComplete: 100, removeOnFail: 100 } },
      );
    }
  }

  /** Writes again every schedule Redis no longer has (see SCHEDULE_CHECK_MS). */
  async #restoreLostSchedules(queue: Queue): Promise<void> {
    try {
      const lost: string[] = [];
      for (const name of this.#jobs.keys()) {
        if (!(await queue.getJobScheduler(name))) lost.push(name);
      }
      if (lost.length === 0) return;
      await this.#upsertSchedules(queue);
      this.#logger.warn({ jobs: lost }, 'job schedules were missing from redis: written again');
    } catch (err) {
      this.#connectionError(err as Error);
    }
  }

  /** Once per outage (the same error repeats at every reconnection attempt), not per attempt. */
  #connectionError(err: Error): void {
    if (err.message === this.#lastError) return;
    this.#lastError = err.message;
    this.#logger.warn({ err: { message: err.message } }, 'job queue: redis error');
  }

  async trigger(name: string): Promise<void> {
    if (!this.#jobs.has(name)) throw new Error(`unknown job ${name}`);
    if (!this.#queue) throw new Error('scheduler not started');
    await this.#queue.add(name, {}, { removeOnComplete: 100, removeOnFail: 100 });
  }

  async close(): Promise<void> {
    this.#closing.abort();
    clearInterval(this.#scheduleCheck);
    // bullmq's graceful close also waits for its fetch loop, which waits for Redis: with Redis
    // away it would never return. The runs of this process are tracked here, so close() waits
    // for them either way and then has bullmq close without waiting for Redis.
    // On a Redis Cluster a ready connection says only that some node answers, not the queue's
    // master: with that one down, a graceful close never returned (SIGKILL after the grace
    // period). So a cluster always takes the path of a Redis that is away.
    const cluster = isCluster(this.#connection);
    const redisAway = cluster || this.#workerConnection?.status !== 'ready';
    if (redisAway) await Promise.allSettled(this.#running);
    await this.#worker?.close(redisAway);
    await this.#queue?.close();
    if (cluster) this.#workerConnection?.disconnect();
    else await this.#workerConnection?.quit().catch(() => this.#workerConnection?.disconnect());
  }
}
