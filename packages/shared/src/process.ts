/** Process entry helpers: every `main.ts` is `runMain(() => Service.create(...))`. */
import { ConfigError } from './config-error.ts';
import { retainTickRecordShape } from './tick-shape.ts';

export interface Runnable {
  /** Resolves once the service is ready; it may wait for its dependencies as long as they are away. */
  start(): Promise<void>;
  /** Also ends a start() still waiting (which then rejects). */
  destroy(): Promise<void>;
}

/** EX_CONFIG (sysexits.h): the one failure a restart cannot fix. */
const EXIT_CONFIG = 78;

/**
 * Creates and starts the service. SIGTERM/SIGINT destroy it (graceful shutdown) and exit 0,
 * at any time: while start() still waits for a dependency too. A configuration error, found
 * when reading the environment or later (a key-encryption key that does not match the stored
 * keys), prints one line naming the variable and exits 78; any other failure to start exits 1.
 * Waiting for PostgreSQL or Redis is not a failure: the services retry it themselves.
 */
export async function runMain(create: () => Promise<Runnable>, shutdownTimeoutMs = 25_000): Promise<void> {
  // Keeps process.nextTick's inline caches monomorphic: ~2 µs per HTTP request (tick-shape.ts).
  retainTickRecordShape();
  let service: Runnable | undefined;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`${signal} received: shutting down\n`);
    const timer = setTimeout(() => {
      process.stderr.write(`shutdown after ${signal} took longer than ${shutdownTimeoutMs} ms; exiting\n`);
      process.exit(1);
    }, shutdownTimeoutMs);
    timer.unref();
    // A signal during create() finds nothing to destroy yet: what it opened dies with the process.
    (service?.destroy() ?? Promise.resolve()).then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  try {
    service = await create();
    if (stopping) return;
    await service.start();
  } catch (err) {
    // start() gave up because destroy() ended it: the shutdown in progress exits.
    if (stopping) return;
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    process.stderr.write(
      `failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  }
}
