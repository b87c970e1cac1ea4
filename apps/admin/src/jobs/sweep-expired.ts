/**
 * Reclaims the rows of expired sessions, device grants and login challenges. All are already refused when
 * presented; this only keeps the tables small. Runs on every replica at start and then on a
 * timer: the deletes are idempotent, so replicas racing each other only delete nothing.
 */
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { DeviceGrantStore } from '../stores/device-grants.ts';
import type { LoginChallengeStore } from '../stores/login-challenges.ts';
import type { SessionStore } from '../stores/sessions.ts';

export const SWEEP_INTERVAL_MS = 10 * 60_000;
/** Expired device grants are kept this long, so a late poll still answers `expired_token`. */
const GRANT_GRACE_MS = 3_600_000;

export interface SweepDeps {
  sessions: SessionStore;
  deviceGrants: DeviceGrantStore;
  loginChallenges: LoginChallengeStore;
  clock: Clock;
  logger: Logger;
}

/** The number of sessions deleted; a failure is logged and counts as none. */
export async function sweepExpired(deps: SweepDeps): Promise<number> {
  try {
    const now = deps.clock.now();
    const deleted = await deps.sessions.deleteExpired(now);
    if (deleted) deps.logger.debug({ deleted }, 'expired sessions deleted');
    const grants = await deps.deviceGrants.deleteExpired(new Date(now.getTime() - GRANT_GRACE_MS));
    if (grants) deps.logger.debug({ deleted: grants }, 'expired device grants deleted');
    const challenges = await deps.loginChallenges.deleteExpired(now);
    if (challenges) deps.logger.debug({ deleted: challenges }, 'expired login challenges deleted');
    return deleted;
  } catch (err) {
    deps.logger.warn({ err }, 'could not delete expired sessions');
    return 0;
  }
}

/** The sweep on a timer: once at start(), then every `SWEEP_INTERVAL_MS`; stop() waits for a running one. */
export class ExpirySweep {
  readonly #deps: SweepDeps;
  #timer: NodeJS.Timeout | undefined;
  #first: Promise<number> | undefined;

  constructor(deps: SweepDeps) {
    this.#deps = deps;
  }

  /** Sweeps now; the number of sessions deleted (never rejects). */
  run(): Promise<number> {
    return sweepExpired(this.#deps);
  }

  start(): void {
    // Once at start, then on the timer: a replica restarted more often than every
    // SWEEP_INTERVAL_MS (a rollout a few minutes apart) would otherwise never sweep.
    this.#first = this.run();
    this.#timer = setInterval(() => void this.run(), SWEEP_INTERVAL_MS);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#first;
  }
}
