/** Process entry helpers: every `main.ts` is `runMain(() => Service.create(...))`. */
import { ConfigError } from './config.ts';

export interface Runnable {
  start(): Promise<void>;
  destroy(): Promise<void>;
}

/**
 * Creates and starts the service; on SIGTERM/SIGINT destroys it (graceful shutdown) and
 * exits. A configuration error prints one line naming the variable and exits 78 (EX_CONFIG).
 */
export async function runMain(create: () => Promise<Runnable>, shutdownTimeoutMs = 25_000): Promise<void> {
  let service: Runnable;
  try {
    service = await create();
    await service.start();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(78);
    }
    process.stderr.write(
      `failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  }
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
    service.destroy().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
