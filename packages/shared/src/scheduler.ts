/**
 * Scheduler: periodic maintenance jobs that must run once per period across all replicas.
 * bullmq job schedulers in distributed mode, timers in embedded mode (one process).
 */
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from './logger.ts';

export type JobHandler = () => Promise<void>;

export interface Scheduler {
  /** Runs `handler` every `everyMs`; call before `start`. */
  every(name: string, everyMs: number, handler: JobHandler): void;
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

export class BullmqScheduler implements Scheduler {
  readonly #jobs = new Map<string, { everyMs: number; handler: JobHandler }>();
  readonly #queueName: string;
  readonly #connection: Redis;
  readonly #prefix: string;
  readonly #logger: Logger;
  #queue: Queue | undefined;
  #worker: Worker | undefined;
  #workerConnection: Redis | undefined;

  /** `connection` is duplicated for the worker (blocking commands need their own). */
  constructor(queueName: string, connection: Redis, prefix: string, logger: Logger) {
    this.#queueName = queueName;
    this.#connection = connection;
    this.#prefix = prefix;
    this.#logger = logger;
  }

  every(name: string, everyMs: number, handler: JobHandler): void {
    this.#jobs.set(name, { everyMs, handler });
  }

  async start(): Promise<void> {
    this.#queue = new Queue(this.#queueName, { connection: this.#connection, prefix: this.#prefix });
    for (const [name, job] of this.#jobs) {
      // Upserting the same scheduler id from every replica keeps exactly one schedule.
      await this.#queue.upsertJobScheduler(
        name,
        { every: job.everyMs },
        { name, opts: { removeOnComplete: 100, removeOnFail: 100 } },
      );
    }
    // bullmq never closes a connection it was handed, so this one is ours to close.
    this.#workerConnection = this.#connection.duplicate({ maxRetriesPerRequest: null });
    this.#worker = new Worker(
      this.#queueName,
      async (job) => {
        const entry = this.#jobs.get(job.name);
        if (entry) await entry.handler();
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
    this.#worker.on('error', (err) =>
      this.#logger.warn({ err: { message: err.message } }, 'job worker error'),
    );
  }

  async trigger(name: string): Promise<void> {
    if (!this.#jobs.has(name)) throw new Error(`unknown job ${name}`);
    if (!this.#queue) throw new Error('scheduler not started');
    await this.#queue.add(name, {}, { removeOnComplete: 100, removeOnFail: 100 });
  }

  async close(): Promise<void> {
    await this.#worker?.close();
    await this.#queue?.close();
    await this.#workerConnection?.quit().catch(() => this.#workerConnection?.disconnect());
  }
}
