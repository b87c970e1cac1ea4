import type { Bus } from '@relayplane/shared/bus';
import { BUS_CHANNELS } from '@relayplane/shared/contract';
import type { Logger } from '@relayplane/shared/logger';
import type { IssuerClient } from './clients.ts';

export interface JwksSnapshot {
  /** The serialized `{"keys":[...]}` document, exactly as served. */
  body: string;
  etag: string;
}

/**
 * Serves the JWKS from memory: the hot path never waits on the issuer. The snapshot is
 * refreshed when the issuer announces a change on the bus and at the latest every
 * `maxAgeMs`. A key enters the set 300 s before it signs, so briefly stale copies are harmless.
 * When the issuer is down, the last snapshot keeps being served.
 */
export class JwksCache {
  readonly #issuer: IssuerClient;
  readonly #maxAgeMs: number;
  readonly #logger: Logger;
  #snapshot: JwksSnapshot | undefined;
  #fetchedAt = 0;
  #inFlight: Promise<JwksSnapshot> | undefined;
  #unsubscribe: (() => Promise<void>) | undefined;

  constructor(issuer: IssuerClient, maxAgeMs: number, logger: Logger) {
    this.#issuer = issuer;
    this.#maxAgeMs = maxAgeMs;
    this.#logger = logger;
  }

  async listen(bus: Bus): Promise<void> {
    this.#unsubscribe = await bus.subscribe(BUS_CHANNELS.signingKeysChanged, () => {
      this.#fetchedAt = 0;
      this.refresh().catch(() => {});
    });
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
        const keys = res.keys.map((k) => ({
          kty: k.kty,
          crv: k.crv,
          x: k.x,
          kid: k.kid,
          alg: k.alg,
          use: k.use,
        }));
        this.#snapshot = { body: JSON.stringify({ keys }), etag: res.etag };
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
    await this.#unsubscribe?.();
  }
}
