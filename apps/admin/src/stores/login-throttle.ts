/**
 * Login throttling: a fixed-window attempt counter per key (an account or a client IP).
 *
 * Two implementations of one port: Redis (shared by every replica) and in-memory (per
 * process, driven by the service clock). `FallbackLoginThrottle` uses Redis and falls back
 * to memory while Redis fails, so a dead Redis never means "no limit".
 */
import { createHash } from 'node:crypto';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { Redis } from 'ioredis';

/** One counted attempt: how many attempts the key has in its window, and when the window ends. */
export interface ThrottleHit {
  count: number;
  /** Milliseconds until the window (and so the count) ends; at least 1. */
  resetInMs: number;
}

export interface LoginThrottle {
  /** Counts one attempt against `key`; the first attempt of a window starts it. */
  hit(key: string): Promise<ThrottleHit>;
  /** Forgets the attempts of `key` (a successful login clears its account). */
  clear(key: string): Promise<void>;
}

/** The one place throttle keys are built (implementations only prepend their namespace). */
export const throttleKeys = {
  /** The account's key: the normalised email, hashed so no address is stored in Redis. */
  account: (normalisedEmail: string): string =>
    `login:acct:${createHash('sha256').update(normalisedEmail).digest('hex')}`,
  ip: (clientIp: string): string => `login:ip:${clientIp}`,
};

/** INCR; PEXPIRE on the window's first hit (or when a key somehow lost its TTL); answers {count, PTTL}. */
export const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {count, tonumber(ARGV[1])}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

const HIT_SHA = createHash('sha1').update(HIT_SCRIPT).digest('hex');

export class RedisLoginThrottle implements LoginThrottle {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #windowMs: number;

  constructor(redis: Redis, prefix: string, windowMs: number) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#windowMs = windowMs;
  }

  async hit(key: string): Promise<ThrottleHit> {
    const full = this.#prefix + key;
    let reply: unknown;
    try {
      reply = await this.#redis.evalsha(HIT_SHA, 1, full, this.#windowMs);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      reply = await this.#redis.eval(HIT_SCRIPT, 1, full, this.#windowMs);
    }
    if (!Array.isArray(reply) || reply.length !== 2) throw new Error('unexpected login throttle reply');
    return { count: Number(reply[0]), resetInMs: Math.max(1, Number(reply[1])) };
  }

  async clear(key: string): Promise<void> {
    await this.#redis.del(this.#prefix + key);
  }
}

export class MemoryLoginThrottle implements LoginThrottle {
  readonly #clock: Clock;
  readonly #windowMs: number;
  readonly #windows = new Map<string, { count: number; endsAt: number }>();

  constructor(clock: Clock, windowMs: number) {
    this.#clock = clock;
    this.#windowMs = windowMs;
  }

  async hit(key: string): Promise<ThrottleHit> {
    const now = this.#clock.now().getTime();
    this.#sweep(now);
    let window = this.#windows.get(key);
    if (!window || window.endsAt <= now) {
      window = { count: 0, endsAt: now + this.#windowMs };
      this.#windows.set(key, window);
    }
    window.count += 1;
    return { count: window.count, resetInMs: Math.max(1, window.endsAt - now) };
  }

  async clear(key: string): Promise<void> {
    this.#windows.delete(key);
  }

  /** How many keys are held (tests check that expired windows are dropped). */
  get size(): number {
    return this.#windows.size;
  }

  #nextSweep = 0;
  /** Drops expired windows, at most once per window length, so the map cannot grow without bound. */
  #sweep(now: number): void {
    if (now < this.#nextSweep) return;
    this.#nextSweep = now + this.#windowMs;
    for (const [key, window] of this.#windows) if (window.endsAt <= now) this.#windows.delete(key);
  }
}

/**
 * Redis first; on a Redis error the in-memory throttle answers instead (one warning per
 * outage), and Redis is used again as soon as it answers.
 */
export class FallbackLoginThrottle implements LoginThrottle {
  readonly #primary: LoginThrottle;
  readonly #fallback: LoginThrottle;
  readonly #logger: Logger;
  #degraded = false;

  constructor(primary: LoginThrottle, fallback: LoginThrottle, logger: Logger) {
    this.#primary = primary;
    this.#fallback = fallback;
    this.#logger = logger;
  }

  /** True while the in-memory throttle is answering. */
  get degraded(): boolean {
    return this.#degraded;
  }

  async hit(key: string): Promise<ThrottleHit> {
    try {
      const hit = await this.#primary.hit(key);
      this.#recovered();
      return hit;
    } catch (err) {
      this.#failed(err);
      return this.#fallback.hit(key);
    }
  }

  async clear(key: string): Promise<void> {
    await this.#fallback.clear(key);
    try {
      await this.#primary.clear(key);
      this.#recovered();
    } catch (err) {
      this.#failed(err);
    }
  }

  #failed(err: unknown): void {
    if (this.#degraded) return;
    this.#degraded = true;
    const message = err instanceof Error ? err.message : String(err);
    this.#logger.warn({ err: { message } }, 'login throttle falling back to in-memory limits');
  }

  #recovered(): void {
    if (!this.#degraded) return;
    this.#degraded = false;
    this.#logger.info('login throttle back on redis');
  }
}
