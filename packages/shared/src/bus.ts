/**
 * Bus: fire-and-forget notifications between replicas (cache invalidation). Redis pub/sub
 * in distributed mode, an in-process emitter in embedded mode. Delivery is at most once;
 * every consumer also refreshes on a timer, so a lost message delays, never breaks.
 */
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';

export interface Bus {
  publish(channel: string, message: string): Promise<void>;
  /** Resolves once the subscription is live; the returned function unsubscribes. */
  subscribe(channel: string, handler: (message: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export class MemoryBus implements Bus {
  readonly #emitter = new EventEmitter().setMaxListeners(0);

  async publish(channel: string, message: string): Promise<void> {
    // Asynchronous like the network would be, so callers cannot depend on re-entrancy.
    queueMicrotask(() => this.#emitter.emit(channel, message));
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    this.#emitter.on(channel, handler);
    return async () => {
      this.#emitter.off(channel, handler);
    };
  }

  async close(): Promise<void> {
    this.#emitter.removeAllListeners();
  }
}

/**
 * Longest a publish holds its caller. Announcements are best-effort (every caller logs a failure
 * and carries on: caches expire, replicas refresh on their own), and the caller is usually a
 * request whose change is already committed. The publishing connection queues commands while it
 * reconnects and times none out, so without a bound a Redis that is down or blackholed held such
 * a request past its deadline: it answered 503 for a change that was made.
 */
const PUBLISH_TIMEOUT_MS = 250;

export class RedisBus implements Bus {
  readonly #pub: Redis;
  readonly #sub: Redis;
  readonly #prefix: string;
  // `live` settles when Redis confirmed the SUBSCRIBE, so every subscriber of a channel can wait for it.
  readonly #channels = new Map<
    string,
    { handlers: Set<(message: string) => void>; live: Promise<unknown> }
  >();

  /** `pub` is shared; `sub` must be a dedicated connection (subscriber mode). */
  constructor(pub: Redis, sub: Redis, prefix: string) {
    this.#pub = pub;
    this.#sub = sub;
    this.#prefix = prefix;
    this.#sub.on('message', (channel: string, message: string) => {
      for (const h of this.#channels.get(channel)?.handlers ?? []) h(message);
    });
  }

  /**
   * Fails after `PUBLISH_TIMEOUT_MS` rather than waiting for Redis: see the constant. The
   * command stays queued and may still go out when Redis returns (a late invalidation is harmless).
   */
  async publish(channel: string, message: string): Promise<void> {
    const sent = this.#pub.publish(this.#prefix + channel, message);
    sent.catch(() => {}); // its failure after the timeout has nobody left to tell
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        sent,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`publish to ${channel} timed out after ${PUBLISH_TIMEOUT_MS} ms`)),
            PUBLISH_TIMEOUT_MS,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    const full = this.#prefix + channel;
    let entry = this.#channels.get(full);
    if (!entry) {
      entry = { handlers: new Set(), live: this.#sub.subscribe(full) };
      this.#channels.set(full, entry);
    }
    const current = entry;
    current.handlers.add(handler);
    try {
      await current.live;
    } catch (err) {
      current.handlers.delete(handler);
      if (this.#channels.get(full) === current) this.#channels.delete(full);
      throw err;
    }
    return async () => {
      // Idempotent, and never touches a newer subscription of the same channel.
      if (!current.handlers.delete(handler) || current.handlers.size > 0) return;
      if (this.#channels.get(full) !== current) return;
      this.#channels.delete(full);
      await this.#sub.unsubscribe(full);
    };
  }

  async close(): Promise<void> {
    this.#channels.clear();
    this.#sub.disconnect();
  }
}
