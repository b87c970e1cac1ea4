import type { Scheduler } from '@relayplane/shared/scheduler';
import { KEY_MAINTENANCE_JOB } from '../keys/key-maintenance.ts';
import type { SigningKeys } from '../keys/signing-keys.ts';

/**
 * Registers the maintenance tick (scheduled rotation, next-key creation, removal) every
 * `intervalMs`; with bullmq one replica runs each occurrence, and every replica learns the
 * result from the bus.
 */
export function scheduleKeyMaintenance(scheduler: Scheduler, keys: SigningKeys, intervalMs: number): void {
  scheduler.every(KEY_MAINTENANCE_JOB, intervalMs, async () => {
    await keys.tick();
  });
}
