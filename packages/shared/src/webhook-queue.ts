/**
 * Where ready deliveries wait for a sender (issue 34): bullmq's `webhooks` queue with Redis, so
 * every admin replica's senders share the work and each job has one sender at a time; an
 * in-process pool without Redis (embedded mode: one process). Either runs at most
 * `concurrency` attempts at once in this process.
 */
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from './logger.ts';
import { duplicateConnection, isCluster } from './redis.ts';

/** What waits in the queue: one attempt of one delivery. */
export interface ReadyDelivery {
  id: string;
  endpointId: string;
  /** Attempts made before this one (with the id: the job's identity). */
  attempts: number;
}

export type DeliveryHandler = (delivery: ReadyDelivery) => Promise<void>;

export interface DeliveryQueue {
  /** Hands deliveries to senders; one job per delivery attempt (a repeat while queued is one job). */
  add(deliveries: readonly ReadyDelivery[]): Promise<void>;
  /** Starts this process's senders. */
  start(handler: DeliveryHandler): void;
  /** Stops taking jobs and waits for the attempts in flight. */
  close(): Promise<void>;
}

export const WEBHOOK_QUEUE = 'webhooks';

export class BullmqDeliveryQueue implements DeliveryQueue {
  readonly #queue: Queue;
  readonly #connection: Redis;
  readonly #prefix: string;
  readonly #concurrency: number;
  readonly #logger: Logger;
  #worker: Worker | undefined;
  #workerConnection: Redis | undefined;
  /** Attempts running in this process (close waits for them). */
  readonly #running = new Set<Promise<void>>();
  #lastError: string | undefined;

  /** `prefix` as the scheduler's (a hash tag on a Redis Cluster). */
  constructor(connection: Redis, prefix: string, concurrency: number, logger: Logger) {
    this.#connection = connection;
    this.#prefix = prefix;
    this.#concurrency = concurrency;
    this.#logger = logger;
    this.#queue = new Queue(WEBHOOK_QUEUE, { connection, prefix });
    this.#queue.on('error', (err) => this.#error(err));
  }

  async add(deliveries: readonly ReadyDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await this.#queue.addBulk(
      deliveries.map((d) => ({
        name: 'deliver',
        data: d,
        // The same attempt queued twice (a pass after a lost answer) is one job.
        opts: { jobId: `${d.id}.${d.attempts}`, removeOnComplete: true, removeOnFail: 1_000 },
      })),
    );
  }

  start(handler: DeliveryHandler): void {
    this.#workerConnection = duplicateConnection(this.#connection, { maxRetriesPerRequest: null });
    const tracked = async (delivery: ReadyDelivery) => {
      const run = handler(delivery);
      this.#running.add(run);
      try {
        await run;
      } finally {
        this.#running.delete(run);
      }
    };
    this.#worker = new Worker<ReadyDelivery>(WEBHOOK_QUEUE, (job) => tracked(job.data), {
      connection: this.#workerConnection,
      prefix: this.#prefix,
      concurrency: this.#concurrency,
    });
    this.#worker.on('failed', (job, err) =>
      this.#logger.error({ err, deliveryId: job?.data.id }, 'webhook delivery job failed'),
    );
    this.#worker.on('error', (err) => this.#error(err));
  }

  /**
   * As BullmqScheduler.close: bullmq's graceful close waits for Redis, which with Redis away (or
   * a cluster's master of the queue down) never returns; the attempts of this process are
   * tracked here, so close waits for them either way and then has bullmq close without waiting.
   */
  async close(): Promise<void> {
    const cluster = isCluster(this.#connection);
    const redisAway = cluster || (this.#workerConnection ?? this.#connection).status !== 'ready';
    if (redisAway) await Promise.allSettled(this.#running);
    await this.#worker?.close(redisAway);
    await this.#queue.close();
    this.#workerConnection?.disconnect();
  }

  #error(err: Error): void {
    if (err.message === this.#lastError) return;
    this.#lastError = err.message;
    this.#logger.warn({ err: { message: err.message } }, 'webhook queue: redis error');
  }
}

/** One process's senders, in memory: what is queued and not sent is found again by the dispatcher. */
export class MemoryDeliveryQueue implements DeliveryQueue {
  readonly #concurrency: number;
  readonly #waiting: ReadyDelivery[] = [];
  readonly #queued = new Set<string>();
  readonly #running = new Set<Promise<void>>();
  readonly #logger: Logger;
  #handler: DeliveryHandler | undefined;
  #closed = false;

  constructor(concurrency: number, logger: Logger) {
    this.#concurrency = concurrency;
    this.#logger = logger;
  }

  async add(deliveries: readonly ReadyDelivery[]): Promise<void> {
    for (const d of deliveries) {
      const key = `${d.id}.${d.attempts}`;
      if (this.#queued.has(key)) continue;
      this.#queued.add(key);
      this.#waiting.push(d);
    }
    this.#drain();
  }

  start(handler: DeliveryHandler): void {
    this.#handler = handler;
    this.#drain();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#waiting.length = 0;
    await Promise.all(this.#running);
  }

  #drain(): void {
    const handler = this.#handler;
    if (!handler) return;
    while (!this.#closed && this.#running.size < this.#concurrency) {
      const next = this.#waiting.shift();
      if (!next) return;
      const run = handler(next)
        .catch((err: unknown) => this.#logger.error({ err, deliveryId: next.id }, 'webhook delivery failed'))
        .finally(() => {
          this.#running.delete(run);
          this.#queued.delete(`${next.id}.${next.attempts}`);
          this.#drain();
        });
      this.#running.add(run);
    }
  }
}
