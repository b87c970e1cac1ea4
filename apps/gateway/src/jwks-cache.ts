import { createHash } from 'node:crypto';
import { BUS_CHANNELS } from '@relayplane/contract/contract';
import type { Bus } from '@relayplane/shared/bus';
import type { Logger } from '@relayplane/shared/logger';
import type { IssuerClient } from './clients.ts';

export interface JwksSnapshot {
  /** The serialized `{"keys":[...]}` document, exactly as served. */
  body: string;
  etag: string;
  /** The keys it lists. */
  keys: readonly Jwk[];
}

/** After a revocation, the issuer is asked again this often while it still lists the key. */
const REVOKED_RECHECK_MS = 100;
/** …at most this many times (a replica that missed the bus message reloads on its own timer). */
const REVOKED_RECHECKS = 50;

/** The kid of a `signing-keys.changed` message announcing a revocation (`{"revoked_kid"}`), if it is one. */
export function revokedKidOf(message: string): string | undefined {
  if (!message.startsWith('{')) return undefined;
  try {
    const kid = (JSON.parse(message) as { revoked_kid?: unknown }).revoked_kid;
    return typeof kid === 'string' && kid !== '' ? kid : undefined;
  } catch {
    return undefined;
  }
}

interface Jwk {
  kty: string;
  crv: string;
  x: string;
  kid: string;
  alg: string;
  use: string;
}

/**
 * Serves the JWKS from memory: the hot path never waits on the issuer. The snapshot is
 * refreshed when the issuer announces a change on the bus and at the latest every
 * `maxAgeMs`. A key enters the set 300 s before it signs, so briefly stale copies are harmless.
 * When the issuer is down, the last snapshot keeps being served.
 *
 * A revoked key (the announcement carries `{"revoked_kid"}`, docs/credentials.md "Revoking a
 * signing key") leaves the snapshot at once, before any refresh, and is never served again by
 * this gateway: an issuer replica that has not reloaded yet may still list it, so the gateway
 * asks again every 100 ms until the issuer's own answer has dropped it.
 */
export class JwksCache {
  readonly #issuer: IssuerClient;
  readonly #maxAgeMs: number;
  readonly #logger: Logger;
  #snapshot: JwksSnapshot | undefined;
  /** The issuer's last answer, before revoked keys are filtered out. */
  #fetched: { keys: Jwk[]; etag: string } | undefined;
  /** Kids announced revoked since this gateway started. */
  readonly #revoked = new Set<string>();
  #closed = false;
  #fetchedAt = 0;
  #inFlight: Promise<JwksSnapshot> | undefined;
  #unsubscribe: (() => Promise<void>) | undefined;

  constructor(issuer: IssuerClient, maxAgeMs: number, logger: Logger) {
    this.#issuer = issuer;
    this.#maxAgeMs = maxAgeMs;
    this.#logger = logger;
  }

  async listen(bus: Bus): Promise<void> {
    this.#unsubscribe = await bus.subscribe(BUS_CHANNELS.signingKeysChanged, (message) => {
      const revoked = revokedKidOf(message);
      if (revoked !== undefined) {
        this.revoke(revoked);
        return;
      }
      this.#fetchedAt = 0;
      this.refresh().catch(() => {});
    });
  }

  /**
   * Drops `kid` from the served key set now and for good, then refreshes until the issuer's
   * answer no longer lists it either (so the keys that replaced it are served too).
   */
  revoke(kid: string): void {
    this.#revoked.add(kid);
    if (this.#fetched) this.#snapshot = this.#publish(this.#fetched);
    this.#fetchedAt = 0;
    void this.#refreshUntilDropped(kid);
  }

  async #refreshUntilDropped(kid: string): Promise<void> {
    for (let attempt = 0; attempt < REVOKED_RECHECKS && !this.#closed; attempt++) {
      // A refresh already under way may have been answered before the issuer reloaded: wait for
      // it, then ask again.
      await this.#inFlight?.catch(() => {});
      try {
        await this.refresh();
      } catch {
        // Logged by refresh; asked again below.
      }
      if (this.#fetched && !this.#fetched.keys.some((k) => k.kid === kid)) return;
      await new Promise((resolve) => setTimeout(resolve, REVOKED_RECHECK_MS));
    }
  }

  /** The snapshot served for an answer of the issuer: without revoked keys. */
  #publish(fetched: { keys: Jwk[]; etag: string }): JwksSnapshot {
    const keys = fetched.keys.filter((k) => !this.#revoked.has(k.kid));
    const body = JSON.stringify({ keys });
    if (keys.length === fetched.keys.length) return { body, etag: fetched.etag, keys };
    // The issuer's tag formula (base64url SHA-256 of the body): the same set, the same tag.
    return { body, etag: `"${createHash('sha256').update(body).digest('base64url')}"`, keys };
  }

  /**
   * The snapshot in memory, without waiting: undefined only before the first fetch. A stale
   * one is still answered, and refreshed behind the response.
   */
  current(): JwksSnapshot | undefined {
    const snapshot = this.#snapshot;
    if (snapshot && Date.now() - this.#fetchedAt >= this.#maxAgeMs) this.refresh().catch(() => {});
    return snapshot;
  }

  async get(): Promise<JwksSnapshot> {
    const snapshot = this.#snapshot;
    if (snapshot && Date.now() - this.#fetchedAt < this.#maxAgeMs) return snapshot;
    if (snapshot) {
      // Stale: answer now, refresh behind the response.
      this.refresh().catch(() => {});
      return snapshot;
    }
    return this.refresh();
  }

  refresh(): Promise<JwksSnapshot> {
    this.#inFlight ??= this.#issuer
      .getJwks({})
      .then((res) => {
        const keys: Jwk[] = res.keys.map((k) => ({
          kty: k.kty,
          crv: k.crv,
          x: k.x,
          kid: k.kid,
          alg: k.alg,
          use: k.use,
        }));
        this.#fetched = { keys, etag: res.etag };
        this.#snapshot = this.#publish(this.#fetched);
        this.#fetchedAt = Date.now();
        return this.#snapshot;
      })
      .catch((err: unknown) => {
        if (this.#snapshot) {
          this.#logger.warn(
            { err: { message: (err as Error).message } },
            'jwks refresh failed; serving the last key set',
          );
          return this.#snapshot;
        }
        throw err;
      })
      .finally(() => {
        this.#inFlight = undefined;
      });
    return this.#inFlight;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#unsubscribe?.();
  }
}
