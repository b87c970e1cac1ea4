/**
 * The revocation feed (ListRevocations): revocations, raised watermarks and revoked signing keys
 * after a cursor, oldest first, long-polled. Waiting calls wake on this replica's revocations
 * (`wake`) and on other replicas' (the bus), and re-read at least every FEED_RECHECK_MS.
 */

import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { IssuerMetrics } from '../metrics.ts';
import type { RevocationEntry, RevocationStore, WatermarkEntry } from './revocation-store.ts';
import type { RevokedKeyEntry } from './signing-key-revocation-store.ts';

const DEFAULT_REVOCATIONS_LIMIT = 100;
const MAX_REVOCATIONS_LIMIT = 1000;
const MAX_REVOCATIONS_WAIT_MS = 30_000;
/** A long-poll re-reads the feed at least this often, so a lost bus message delays by at most this. */
const FEED_RECHECK_MS = 1_000;
/** A watermark is sent in the feed this long past its instant: every credential it refuses has expired by then (plus leeway). */
export const WATERMARK_SLACK_MS = 60_000;

export interface RevocationPage {
  revocations: RevocationEntry[];
  nextCursor: bigint;
  /** Project watermarks in force (docs/credentials.md, "Containment"). */
  watermarks: WatermarkEntry[];
  /** Signing key revocations in force (docs/credentials.md, "Revoking a signing key"). */
  revokedKeys: RevokedKeyEntry[];
}

export interface RevocationFeedDeps {
  bus: Bus;
  clock: Clock;
  store: RevocationStore;
  /** The longest credential lifetime: how long a watermark or a revoked key stays in the feed. */
  maxTtlSeconds: number;
  /** Feed delivery delays; absent: nothing is measured. */
  metrics?: IssuerMetrics;
}

export class RevocationFeed {
  readonly #d: RevocationFeedDeps;
  readonly #waiters = new Set<() => void>();
  #unsubscribe: (() => Promise<void>) | undefined;
  #stopped = false;

  constructor(deps: RevocationFeedDeps) {
    this.#d = deps;
  }

  /** Follows revocations made by other replicas (wakes long-polls). */
  async start(): Promise<void> {
    this.#stopped = false;
    this.#unsubscribe = await this.#d.bus.subscribe(BUS_CHANNELS.credentialsRevoked, () => this.wake());
  }

  /** Stops following the bus and ends waiting long-polls (they answer what they have). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.wake();
    await this.#unsubscribe?.().catch(() => {});
    this.#unsubscribe = undefined;
  }

  /**
   * Revocations after `cursor`, oldest first. With `waitMs` > 0 and nothing new, waits for
   * the first new one (bus message, or a re-read every second) until `waitMs` has passed.
   */
  async list(cursor: bigint, limit: number, waitMs: number, signal?: AbortSignal): Promise<RevocationPage> {
    if (cursor < 0n) throw new AppError('invalid_request', 'cursor must not be negative');
    if (!Number.isInteger(limit) || limit < 0 || limit > MAX_REVOCATIONS_LIMIT) {
      throw new AppError(
        'invalid_request',
        `limit must be between 0 (the default, ${DEFAULT_REVOCATIONS_LIMIT}) and ${MAX_REVOCATIONS_LIMIT}`,
      );
    }
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_REVOCATIONS_WAIT_MS) {
      throw new AppError('invalid_request', `wait_ms must be between 0 and ${MAX_REVOCATIONS_WAIT_MS}`);
    }
    const pageSize = limit || DEFAULT_REVOCATIONS_LIMIT;
    const deadline = performance.now() + waitMs;
    const openedAtMs = this.#d.clock.now().getTime();
    for (;;) {
      // Armed before the read: a revocation committed meanwhile still wakes us.
      const woken = this.#nextWake();
      // Watermarks and revoked keys first: every revocation before the newest one's sequence
      // has committed by then (one lock orders them all), so the read after it cannot miss one.
      const since = new Date(
        this.#d.clock.now().getTime() - this.#d.maxTtlSeconds * 1000 - WATERMARK_SLACK_MS,
      );
      const watermarks = await this.#d.store.watermarksSince(since);
      const revokedKeys = await this.#d.store.signingKeys.inFeed(this.#d.clock.now());
      const revocations = await this.#d.store.revocationsAfter(cursor, pageSize);
      const raised = [...watermarks, ...revokedKeys].reduce(
        (max, w) => (w.sequence > max ? w.sequence : max),
        cursor,
      );
      const remaining = deadline - performance.now();
      if (revocations.length || raised > cursor || remaining <= 0 || signal?.aborted || this.#stopped) {
        woken.cancel();
        const last = revocations.at(-1)?.sequence ?? cursor;
        // A full page may have more revocations before the watermark's position: stop at the page.
        const nextCursor = revocations.length === pageSize || raised < last ? last : raised;
        if (waitMs > 0 && revocations.length) {
          this.#d.metrics?.feedDelivered(
            revocations.map((r) => r.revokedAt),
            openedAtMs,
            this.#d.clock.now().getTime(),
          );
        }
        return { revocations, nextCursor, watermarks, revokedKeys };
      }
      await woken.wait(Math.min(remaining, FEED_RECHECK_MS), signal);
    }
  }

  /** Wakes this replica's waiting long-polls (a revocation was committed). */
  wake(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) w();
  }

  #nextWake(): { wait(ms: number, signal?: AbortSignal): Promise<void>; cancel(): void } {
    let fire: () => void = () => {};
    const woken = new Promise<void>((resolve) => {
      fire = resolve;
    });
    this.#waiters.add(fire);
    const cancel = () => this.#waiters.delete(fire);
    return {
      cancel,
      async wait(ms, signal) {
        let timer: NodeJS.Timeout | undefined;
        let onAbort: (() => void) | undefined;
        try {
          await Promise.race([
            woken,
            new Promise<void>((resolve) => {
              timer = setTimeout(resolve, ms);
              onAbort = resolve;
              signal?.addEventListener('abort', onAbort, { once: true });
            }),
          ]);
        } finally {
          clearTimeout(timer);
          if (onAbort) signal?.removeEventListener('abort', onAbort);
          cancel();
        }
      },
    };
  }
}
