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

export class RedisBus implements Bus {
  readonly #pub: Redis;
  readonly #sub: Redis;
  readonly #prefix: string;
  readonly #handlers = new Map<string, Set<(message: string) => void>>();

  /** `pub` is shared; `sub` must be a dedicated connection (subscriber mode). */
  constructor(pub: Redis, sub: Redis, prefix: string) {
    this.#pub = pub;
    this.#sub = sub;
    this.#prefix = prefix;
    this.#sub.on('message', (channel: string, message: string) => {
      for (const h of this.#handlers.get(channel) ?? []) h(message);
    });
  }

  async publish(channel: string, message: string): Promise<void> {
    await this.#pub.publish(this.#prefix + channel, message);
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    const full = this.#prefix + channel;
    let set = this.#handlers.get(full);
    if (!set) {
      set = new Set();
      this.#handlers.set(full, set);
      await this.#sub.subscribe(full);
    }
    set.add(handler);
    return async () => {
      set.delete(handler);
      if (set.size === 0) {
        this.#handlers.delete(full);
        await this.#sub.unsubscribe(full);
      }
    };
  }

  async close(): Promise<void> {
    this.#handlers.clear();
    this.#sub.disconnect();
  }
}
