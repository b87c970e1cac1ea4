import type { HealthState } from './health.ts';
import { ServingStatus } from './health.ts';
import type { Logger } from './logger.ts';

export interface Pingable {
  ping(timeoutMs?: number): Promise<boolean>;
}

/**
 * Keeps the health status of `services` (and the server as a whole) in step with the
 * database: SERVING only while it answers. Returns a function that stops watching.
 */
export function watchDatabase(
  health: HealthState,
  services: readonly string[],
  database: Pingable,
  logger: Logger,
  intervalMs = 1_000,
): { stop: () => void; check: () => Promise<boolean> } {
  let last: boolean | undefined;
  let inFlight = false;
  const check = async () => {
    const ok = await database.ping(Math.max(250, intervalMs - 100));
    const status = ok ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
    for (const s of ['', ...services]) health.set(s, status);
    if (ok !== last) {
      if (last !== undefined) {
        if (ok) logger.info('database reachable again: serving');
        else logger.error('database unreachable: not serving');
      }
      last = ok;
    }
    return ok;
  };
  const timer = setInterval(() => {
    if (inFlight) return;
    inFlight = true;
    check().finally(() => {
      inFlight = false;
    });
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer), check };
}
