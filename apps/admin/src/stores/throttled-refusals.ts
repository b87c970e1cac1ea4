/**
 * Which throttled login refusals are recorded (docs/audit.md, "Throttled logins"). A throttled
 * attempt changes nothing and costs no password check, so recording each one would let anyone
 * flood a trail (and serialise every unknown email on the platform chain's head lock). Instead,
 * per throttle key (an account, a client IP, or an account from one client IP) and throttle
 * window, the first refusal is recorded, and it carries how many refusals it stands for: itself
 * plus those refused since the key's previous recorded refusal and not recorded (the rest of the
 * previous window).
 *
 * In Redis, where the throttle counts: one script, so replicas agree on which refusal records.
 * Without Redis, or while it fails, every refusal is recorded on its own, as before.
 */
import type { Logger } from '@relayplane/shared/logger';
import { loadScript } from '@relayplane/shared/redis-scripts';
import type { Redis } from 'ioredis';
import { throttleKeys } from '../redis/keys.ts';

/** Counts a refusal and claims its window's recording: claim-refusal-2.lua. */
const CLAIM_REFUSAL = loadScript(new URL('./claim-refusal-2.lua', import.meta.url));

/** Unrecorded refusals are kept this long for the key's next recorded refusal. */
export const UNRECORDED_REFUSALS_TTL_MS = 24 * 60 * 60 * 1000;

export interface ThrottledRefusals {
  /**
   * Counts one refused attempt of `throttleKey`, whose window ends in `windowLeftMs`. Answers
   * how many refusals the event to record now stands for (≥ 1), 0 when this window's event is
   * already recorded (record nothing), or 1 when it cannot tell (no Redis, Redis failing).
   */
  claim(throttleKey: string, windowLeftMs: number): Promise<number>;
  /** The event of a claim could not be recorded: the window's next refusal records instead, with these too. */
  release(throttleKey: string, refused: number): Promise<void>;
}

export class RedisThrottledRefusals implements ThrottledRefusals {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #logger: Logger;
  #failing = false;

  constructor(redis: Redis, prefix: string, logger: Logger) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#logger = logger;
  }

  async claim(throttleKey: string, windowLeftMs: number): Promise<number> {
    const keys = this.#keys(throttleKey);
    const args = [Math.max(1, Math.ceil(windowLeftMs)), UNRECORDED_REFUSALS_TTL_MS];
    try {
      const reply = await CLAIM_REFUSAL.run(this.#redis, [keys.pending, keys.recorded], args);
      if (this.#failing) {
        this.#failing = false;
        this.#logger.info('throttled login refusals aggregated again (Redis answers)');
      }
      return Number(reply);
    } catch (err) {
      if (!this.#failing) {
        this.#failing = true;
        this.#logger.warn(
          { err: { message: err instanceof Error ? err.message : String(err) } },
          'throttled login refusals: Redis failing; each one is recorded',
        );
      }
      return 1;
    }
  }

  async release(throttleKey: string, refused: number): Promise<void> {
    const keys = this.#keys(throttleKey);
    try {
      await this.#redis
        .multi()
        .del(keys.recorded)
        .incrby(keys.pending, refused)
        .pexpire(keys.pending, UNRECORDED_REFUSALS_TTL_MS)
        .exec();
    } catch {
      // The count of this window's refusals is lost; the refusal itself answered 503.
    }
  }

  #keys(throttleKey: string): { pending: string; recorded: string } {
    return {
      pending: this.#prefix + throttleKeys.refusalsUnrecorded(throttleKey),
      recorded: this.#prefix + throttleKeys.refusalRecorded(throttleKey),
    };
  }
}

/** Without Redis (embedded mode): every refusal is recorded (the in-memory throttle is per process anyway). */
export const recordEveryRefusal: ThrottledRefusals = {
  claim: async () => 1,
  release: async () => undefined,
};
