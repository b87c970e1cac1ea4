import { setTimeout as delay } from 'node:timers/promises';
import { backoffDelayMs } from './backoff.ts';

/** An empty answer that came back faster than this means the server did not hold the poll. */
const MIN_EMPTY_POLL_INTERVAL_MS = 1_000;
/** Allowance over `wait` before a held poll counts as hung. */
const POLL_TIMEOUT_SLACK_MS = 10_000;

export interface RevocationFeedOptions {
  url: string;
  relayToken: string;
  waitSeconds: number;
  fetch: typeof globalThis.fetch;
  clock: () => number;
  /** Revocations are remembered this long past `expires_at`, covering the verifier's leeway. */
  retainAfterExpiryMs: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  signal: AbortSignal;
  onError: (error: Error) => void;
  /** Called once per signing key the feed newly reports revoked (`revoked_keys`). */
  onKeyRevoked: (kid: string) => void;
}

/**
 * Follows `GET /v1/credentials/revocations` (docs/credentials.md, "Revocation feed") in a
 * long-poll loop and keeps jti → the instant it can be forgotten, project → its watermark
 * (the `watermarks` of each answer: credentials of that project issued before it are refused),
 * and the revoked signing keys (`revoked_keys`: credentials whose header names one are refused),
 * and when the feed was last read successfully (the staleness bound).
 */
export class RevocationFeed {
  readonly #options: RevocationFeedOptions;
  readonly #revoked = new Map<string, number>();
  /** project id → `issued_before` (ms): only ever raised, never forgotten (one entry per project). */
  readonly #watermarks = new Map<string, number>();
  /** kid → `revoked_at` (ms): never forgotten (one entry per revoked key, a rare event). */
  readonly #revokedKeys = new Map<string, number>();
  /** `clock()` at the last successful poll; undefined before the first one. */
  #lastSuccessAt: number | undefined;
  #cursor = 0;
  #caughtUp = false;
  #loop: Promise<void> | undefined;
  #markReady: () => void = () => {};
  readonly ready: Promise<void>;

  constructor(options: RevocationFeedOptions) {
    this.#options = options;
    this.ready = new Promise((resolve) => {
      this.#markReady = resolve;
    });
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Resolves once the loop has stopped; call after aborting the signal. */
  async stopped(): Promise<void> {
    await this.#loop;
  }

  isRevoked(jti: string): boolean {
    const forgetAt = this.#revoked.get(jti);
    if (forgetAt === undefined) return false;
    if (this.#options.clock() >= forgetAt) {
      this.#revoked.delete(jti);
      return false;
    }
    return true;
  }

  /** Whether the feed reported the signing key `kid` revoked. */
  isKeyRevoked(kid: string): boolean {
    return this.#revokedKeys.has(kid);
  }

  /** How many signing keys the feed reported revoked. */
  get revokedKeyCount(): number {
    return this.#revokedKeys.size;
  }

  /** How many revoked jtis are remembered. */
  get revokedCount(): number {
    return this.#revoked.size;
  }

  /** `clock()` when the feed was last read successfully; undefined before the first success. */
  get lastSuccessAt(): number | undefined {
    return this.#lastSuccessAt;
  }

  /**
   * Whether a credential of `projectId` issued at `iatSeconds` is before the project's
   * watermark (a bulk revocation with `issued_before`), whether or not its jti was listed.
   */
  isBeforeWatermark(projectId: string, iatSeconds: number): boolean {
    const watermark = this.#watermarks.get(projectId);
    return watermark !== undefined && iatSeconds * 1000 < watermark;
  }

  async #run(): Promise<void> {
    const { signal, onError, backoffInitialMs, backoffMaxMs } = this.#options;
    let failures = 0;
    while (!signal.aborted) {
      const startedAt = performance.now();
      // The first poll catches up on the backlog without waiting, so `ready` is not held up
      // for a whole long-poll; every later one is held by the server.
      const catchingUp = !this.#caughtUp;
      let pause = 0;
      try {
        const received = await this.#poll(catchingUp ? 0 : this.#options.waitSeconds);
        failures = 0;
        this.#caughtUp = true;
        this.#markReady();
        if (received === 0 && !catchingUp)
          pause = MIN_EMPTY_POLL_INTERVAL_MS - (performance.now() - startedAt);
      } catch (cause) {
        if (signal.aborted) break;
        failures += 1;
        const error = cause instanceof Error ? cause : new Error(String(cause));
        onError(new Error(`revocation feed poll failed: ${error.message}`, { cause }));
        pause = backoffDelayMs(failures, backoffInitialMs, backoffMaxMs);
      }
      if (pause > 0) {
        try {
          await delay(pause, undefined, { signal });
        } catch {
          break; // aborted by close()
        }
      }
    }
  }

  /** One feed request; returns how many revocations it brought. */
  async #poll(waitSeconds: number): Promise<number> {
    const { url, relayToken, fetch, signal } = this.#options;
    const target = new URL(url);
    target.searchParams.set('cursor', String(this.#cursor));
    target.searchParams.set('wait', String(waitSeconds));
    const response = await fetch(target, {
      headers: { accept: 'application/json', authorization: `Bearer ${relayToken}` },
      signal: AbortSignal.any([signal, AbortSignal.timeout(waitSeconds * 1000 + POLL_TIMEOUT_SLACK_MS)]),
    });
    if (response.status !== 200) {
      await response.body?.cancel();
      throw new Error(`HTTP ${response.status}`);
    }
    const page = parsePage(await response.json());
    const now = this.#options.clock();
    for (const { jti, expiresAtMs } of page.revocations) {
      const forgetAt = expiresAtMs + this.#options.retainAfterExpiryMs;
      if (forgetAt > now) this.#revoked.set(jti, forgetAt);
    }
    // Merged, never replaced: an answer cut short (shutdown) carries none, and a watermark the
    // feed stops sending refuses only credentials that have expired by then.
    for (const { projectId, issuedBeforeMs } of page.watermarks) {
      if (issuedBeforeMs > (this.#watermarks.get(projectId) ?? Number.NEGATIVE_INFINITY)) {
        this.#watermarks.set(projectId, issuedBeforeMs);
      }
    }
    // Merged too (an answer cut short carries none); the key is dropped before the cursor moves.
    for (const { kid, revokedAtMs } of page.revokedKeys) {
      if (this.#revokedKeys.has(kid)) continue;
      this.#revokedKeys.set(kid, revokedAtMs);
      this.#options.onKeyRevoked(kid);
    }
    this.#cursor = page.nextCursor;
    this.#lastSuccessAt = this.#options.clock();
    for (const [jti, forgetAt] of this.#revoked) {
      if (forgetAt <= now) this.#revoked.delete(jti);
    }
    return page.revocations.length;
  }
}

interface FeedPage {
  revocations: { jti: string; expiresAtMs: number }[];
  nextCursor: number;
  watermarks: { projectId: string; issuedBeforeMs: number }[];
  revokedKeys: { kid: string; revokedAtMs: number }[];
}

function parsePage(body: unknown): FeedPage {
  if (typeof body !== 'object' || body === null) throw new Error('feed answer is not an object');
  const { revocations, next_cursor, watermarks, revoked_keys } = body as {
    revocations?: unknown;
    next_cursor?: unknown;
    watermarks?: unknown;
    revoked_keys?: unknown;
  };
  if (!Array.isArray(revocations)) throw new Error('feed answer has no "revocations" array');
  const nextCursor = typeof next_cursor === 'string' ? Number(next_cursor) : next_cursor;
  if (typeof nextCursor !== 'number' || !Number.isSafeInteger(nextCursor) || nextCursor < 0) {
    throw new Error('feed answer has no valid "next_cursor"');
  }
  const entries: FeedPage['revocations'] = [];
  for (const entry of revocations) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { jti, expires_at } = entry as { jti?: unknown; expires_at?: unknown };
    if (typeof jti !== 'string' || jti === '') continue;
    entries.push({ jti, expiresAtMs: parseInstant(expires_at) });
  }
  // Absent from control planes that predate watermarks: none.
  const marks: FeedPage['watermarks'] = [];
  for (const entry of Array.isArray(watermarks) ? watermarks : []) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { project_id, issued_before } = entry as { project_id?: unknown; issued_before?: unknown };
    if (typeof project_id !== 'string' || project_id === '') continue;
    // An instant that cannot be read refuses every credential of the project (fail closed).
    marks.push({ projectId: project_id, issuedBeforeMs: parseInstant(issued_before) });
  }
  // Absent from control planes that predate signing key revocation: none.
  const keys: FeedPage['revokedKeys'] = [];
  for (const entry of Array.isArray(revoked_keys) ? revoked_keys : []) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { kid, revoked_at } = entry as { kid?: unknown; revoked_at?: unknown };
    if (typeof kid !== 'string' || kid === '') continue;
    keys.push({ kid, revokedAtMs: parseInstant(revoked_at) });
  }
  return { revocations: entries, nextCursor, watermarks: marks, revokedKeys: keys };
}

/** RFC 3339 string or seconds since the epoch; anything else is kept forever (fail closed). */
function parseInstant(value: unknown): number {
  if (typeof value === 'number' && Number.isFinite(value)) return value * 1000;
  if (typeof value === 'string') {
    const parsed = Date.parse(value);
    if (Number.isFinite(parsed)) return parsed;
  }
  return Number.POSITIVE_INFINITY;
}
