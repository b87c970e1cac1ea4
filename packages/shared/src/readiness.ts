/**
 * Readiness: what a service reports on the standard health protocol, and how it waits for its
 * dependencies instead of exiting.
 *
 * Two kinds of status, which the Helm chart's probes read: the whole server ('') is liveness,
 * SERVING from the moment the server listens until it shuts down, whatever its dependencies do,
 * so an orchestrator never restarts a process that is only waiting for PostgreSQL or Redis. A
 * service's full name is readiness: NOT_SERVING until its start-up is done, then it follows the
 * dependencies the service cannot answer without (`watchDatabase`, `watchRedis`).
 *
 * Waiting (`retryUntilDone`) is capped exponential backoff with jitter, logged once per state
 * change rather than once per attempt; only a configuration error ends it, since no wait fixes
 * a bad setting.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { ConfigError } from './config-error.ts';
import { type HealthState, ServingStatus } from './health.ts';
import type { Logger } from './logger.ts';

export interface Pingable {
  ping(timeoutMs?: number): Promise<boolean>;
}

/**
 * Keeps the health status of `services` in step with the database: SERVING only while it
 * answers. The whole server ('') is left alone: it is liveness, not readiness.
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
    for (const s of services) health.set(s, status);
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

/**
 * Keeps `services` SERVING while `redis` is connected and ready, NOT_SERVING otherwise (for
 * what a service cannot do without Redis); logs each change after the first status, `what`
 * naming what is affected. Returns a function that stops watching.
 */
export function watchRedis(
  health: HealthState,
  services: readonly string[],
  redis: Redis,
  logger: Logger,
  what: string,
): () => void {
  let last = redis.status === 'ready';
  const set = (ready: boolean) => {
    for (const s of services) health.set(s, ready ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
    if (ready === last) return;
    // The connection's own error is logged where it is made; this says what it means.
    if (ready) logger.info(`redis reachable: ${what} serving`);
    else logger.warn(`redis unreachable: ${what} not serving until it answers`);
    last = ready;
  };
  const up = () => set(true);
  const down = () => set(false);
  redis.on('ready', up);
  redis.on('close', down);
  redis.on('end', down);
  set(last);
  return () => {
    redis.off('ready', up);
    redis.off('close', down);
    redis.off('end', down);
  };
}

export interface RetryOptions {
  logger: Logger;
  /** Ends the wait: the returned promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The first delay (default 100 ms); it doubles after each failure up to `maxDelayMs`. */
  initialDelayMs?: number;
  /**
   * The longest delay (default 2 s). It bounds how long after a dependency's return the next
   * attempt comes, so keep it well under the time a service promises to be ready in.
   */
  maxDelayMs?: number;
}

/** Backoff defaults: a dependency that returns is tried again within about 2 s. */
const INITIAL_DELAY_MS = 100;
const MAX_DELAY_MS = 2_000;

/**
 * Runs `attempt` until it succeeds, waiting between failures with capped exponential backoff
 * and jitter (each delay is drawn from the upper half of its ceiling, so replicas that failed
 * together do not retry together). Logs the first failure, each failure that differs from the
 * previous one, and the success that follows failures, never each attempt. A `ConfigError` is
 * not retried: it is thrown at once.
 */
export async function retryUntilDone<T>(
  what: string,
  attempt: () => Promise<T>,
  o: RetryOptions,
): Promise<T> {
  const initial = o.initialDelayMs ?? INITIAL_DELAY_MS;
  const max = o.maxDelayMs ?? MAX_DELAY_MS;
  const startedAt = performance.now();
  let failures = 0;
  let lastProblem: string | undefined;
  for (;;) {
    o.signal?.throwIfAborted();
    try {
      const result = await attempt();
      if (failures > 0) {
        o.logger.info(
          { attempts: failures + 1, waitedMs: Math.round(performance.now() - startedAt) },
          `${what}: done`,
        );
      }
      return result;
    } catch (err) {
      // A failure caused by the abort (a closed pool, a disconnected client) is not news.
      o.signal?.throwIfAborted();
      if (err instanceof ConfigError) throw err;
      failures++;
      const problem = describe(err);
      if (problem !== lastProblem) {
        o.logger.warn(
          { err: { message: problem }, attempt: failures },
          `${what}: waiting for a dependency, retrying with backoff`,
        );
        lastProblem = problem;
      }
      const ceiling = Math.min(max, initial * 2 ** Math.min(failures - 1, 20));
      await delay(ceiling / 2 + (Math.random() * ceiling) / 2, undefined, { signal: o.signal }).catch(
        (aborted: unknown) => {
          // The signal's own reason (e.g. "admin is stopping"), not the timer's AbortError.
          o.signal?.throwIfAborted();
          throw aborted;
        },
      );
    }
  }
}

/** One line for a failure: pg's AggregateError (one per address tried) has an empty message. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const message = err.message || (err instanceof AggregateError ? describe(err.errors[0]) : '');
  if (typeof code === 'string' && !message.includes(code)) return message ? `${code}: ${message}` : code;
  return message || err.name;
}
