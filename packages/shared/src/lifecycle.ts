/**
 * What a composition root (`apps/<app>/src/context.ts`) opened, closed in reverse order: each
 * resource registers its closer when it is made, so whatever was made after it (and may use
 * it) is closed before it. The one shutdown order of an app is the order it was built in.
 */
import type { Logger } from './logger.ts';

interface Closer {
  name: string;
  close: () => unknown;
}

export class Lifecycle {
  readonly #closers: Closer[] = [];
  readonly #logger: Logger | undefined;
  #closing: Promise<void> | undefined;

  constructor(logger?: Logger) {
    this.#logger = logger;
  }

  /** Registers `resource`'s closer (run by close(), after everything registered later); answers `resource`. */
  use<T>(name: string, resource: T, close: (resource: T) => unknown): T {
    this.onClose(name, () => close(resource));
    return resource;
  }

  /** Registers a closer of its own (a timer, a subscription, a step of the drain). */
  onClose(name: string, close: () => unknown): void {
    if (this.#closing) throw new Error(`${name} registered while the lifecycle closes`);
    this.#closers.push({ name, close });
  }

  /**
   * Runs every closer, the last registered first, each awaited; one that fails is logged and
   * the rest still run (a shutdown never stops half-way). Idempotent: a second call waits for
   * the first.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const { name, close } of this.#closers.reverse()) {
        try {
          await close();
        } catch (err) {
          this.#logger?.error({ err, resource: name }, 'closing a resource failed');
        }
      }
    })();
    return this.#closing;
  }

  /**
   * Runs `build` with this lifecycle; when it throws, closes what it had opened before
   * rethrowing (a half-built context leaks nothing).
   */
  async build<T>(build: (lifecycle: Lifecycle) => Promise<T> | T): Promise<T> {
    try {
      return await build(this);
    } catch (err) {
      await this.close();
      throw err;
    }
  }
}
