import { type CryptoKey, importJWK, type JWK } from 'jose';
import { VerificationError } from './errors.ts';

/** Freshness when the JWKS response carries no `Cache-Control: max-age`. */
const DEFAULT_MAX_AGE_SECONDS = 300;
/** Upper bound on `max-age`, so a misconfigured proxy cannot pin a key set for days. */
const MAX_MAX_AGE_SECONDS = 86_400;

export interface JwksCacheOptions {
  url: string;
  fetch: typeof globalThis.fetch;
  clock: () => number;
  refetchIntervalMs: number;
  timeoutMs: number;
  signal: AbortSignal;
  onError: (error: Error) => void;
}

/**
 * The relay's copy of the issuer's JWKS. Keys are imported once per key set the server
 * sends (a 200), never per verification; a 304 only extends freshness. A failed refresh
 * keeps the last good key set and is not retried before `refetchIntervalMs`.
 */
export class JwksCache {
  readonly #options: JwksCacheOptions;
  #keys: Map<string, CryptoKey> | undefined;
  #etag: string | undefined;
  #freshUntil = Number.NEGATIVE_INFINITY;
  #lastFetchAt = Number.NEGATIVE_INFINITY;
  #inFlight: Promise<void> | undefined;
  /** Kids the revocation feed reported revoked: dropped, and never imported again. */
  readonly #revoked = new Set<string>();
  /** JWKS fetches caused by a revoked key (metrics). */
  revocationRefetches = 0;

  constructor(options: JwksCacheOptions) {
    this.#options = options;
  }

  get loaded(): boolean {
    return this.#keys !== undefined;
  }

  /** How many keys the cached set holds. */
  get size(): number {
    return this.#keys?.size ?? 0;
  }

  /** `clock()` at the last fetch attempt (any cause); -Infinity before the first. */
  get lastFetchAt(): number {
    return this.#lastFetchAt;
  }

  /**
   * The feed reported `kid` revoked: drops it now and for good, and refetches the key set at
   * once rather than at its max-age (to learn the key that replaced it). Afterwards an unknown
   * kid may refetch once more without waiting `refetchIntervalMs`: a key created by the
   * revocation may be younger than this fetch.
   */
  revoke(kid: string): void {
    this.#revoked.add(kid);
    this.#keys?.delete(kid);
    this.revocationRefetches += 1;
    const refetch = this.#inFlight
      ? this.#inFlight.catch(() => {}).then(() => this.refresh())
      : this.refresh();
    refetch
      .catch(() => {})
      .finally(() => {
        this.#lastFetchAt = Number.NEGATIVE_INFINITY;
      });
  }

  /** The key for `kid`, refreshing when stale and (rate-limited) when the kid is unknown. */
  async getKey(kid: string): Promise<CryptoKey> {
    const { clock, refetchIntervalMs } = this.#options;
    if (clock() >= this.#freshUntil) await this.#refreshQuietly();
    if (this.#keys === undefined) {
      throw new VerificationError('jwks_unavailable', 'the JWKS has not been fetched successfully yet');
    }
    const known = this.#keys.get(kid);
    if (known !== undefined) return known;
    // Any fetch counts towards the limit: a key set fetched moments ago is as current as a refetch.
    if (clock() - this.#lastFetchAt >= refetchIntervalMs) {
      await this.#refreshQuietly();
      const refetched = this.#keys.get(kid);
      if (refetched !== undefined) return refetched;
    }
    throw new VerificationError('unknown_kid', 'no key in the JWKS has the token\'s "kid"');
  }

  /** Fetches now (sharing a fetch already under way); rejects when the fetch fails. */
  refresh(): Promise<void> {
    this.#inFlight ??= this.#fetch().finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  async #refreshQuietly(): Promise<void> {
    try {
      await this.refresh();
    } catch {
      // Reported through onError by #fetch; verification goes on with the last good key set.
    }
  }

  async #fetch(): Promise<void> {
    const { url, fetch, clock, refetchIntervalMs, timeoutMs, signal, onError } = this.#options;
    this.#lastFetchAt = clock();
    try {
      const headers: Record<string, string> = { accept: 'application/json' };
      if (this.#etag !== undefined && this.#keys !== undefined) headers['if-none-match'] = this.#etag;
      const response = await fetch(url, {
        headers,
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
      });
      if (response.status === 304 && this.#keys !== undefined) {
        await response.body?.cancel();
        this.#freshUntil = clock() + maxAgeMs(response.headers.get('cache-control'));
        return;
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new Error(`JWKS fetch answered HTTP ${response.status}`);
      }
      const keys = await importKeySet(await response.json(), this.#revoked);
      this.#keys = keys;
      this.#etag = response.headers.get('etag') ?? undefined;
      this.#freshUntil = clock() + maxAgeMs(response.headers.get('cache-control'));
    } catch (cause) {
      this.#freshUntil = clock() + refetchIntervalMs;
      const error = cause instanceof Error ? cause : new Error(String(cause));
      if (!signal.aborted) onError(new Error(`JWKS refresh from ${url} failed: ${error.message}`, { cause }));
      throw error;
    }
  }
}

function maxAgeMs(cacheControl: string | null): number {
  if (cacheControl === null) return DEFAULT_MAX_AGE_SECONDS * 1000;
  const directives = cacheControl.toLowerCase().split(',');
  let seconds = DEFAULT_MAX_AGE_SECONDS;
  for (const raw of directives) {
    const directive = raw.trim();
    if (directive === 'no-cache' || directive === 'no-store') return 0;
    const match = /^max-age\s*=\s*"?(\d+)"?$/.exec(directive);
    if (match?.[1] !== undefined) seconds = Number(match[1]);
  }
  return Math.min(seconds, MAX_MAX_AGE_SECONDS) * 1000;
}

/** Imports the Ed25519 signing keys of a JWKS document; other keys can never verify EdDSA. */
async function importKeySet(
  document: unknown,
  revoked: ReadonlySet<string>,
): Promise<Map<string, CryptoKey>> {
  if (
    typeof document !== 'object' ||
    document === null ||
    !Array.isArray((document as { keys?: unknown }).keys)
  ) {
    throw new Error('JWKS document has no "keys" array');
  }
  const keys = new Map<string, CryptoKey>();
  for (const jwk of (document as { keys: unknown[] }).keys) {
    if (typeof jwk !== 'object' || jwk === null) continue;
    const { kty, crv, kid, x, alg, use } = jwk as Record<string, unknown>;
    if (kty !== 'OKP' || crv !== 'Ed25519' || typeof kid !== 'string' || typeof x !== 'string') continue;
    // A cache between us and the control plane may still list a revoked key: never use it again.
    if (revoked.has(kid)) continue;
    if ((alg !== undefined && alg !== 'EdDSA' && alg !== 'Ed25519') || (use !== undefined && use !== 'sig'))
      continue;
    try {
      const key = await importJWK({ kty, crv, x } satisfies JWK, 'EdDSA');
      if (!(key instanceof Uint8Array)) keys.set(kid, key);
    } catch {
      // A key we cannot import is as good as absent: tokens naming it fail with unknown_kid.
    }
  }
  if (keys.size === 0) throw new Error('JWKS document holds no usable Ed25519 key');
  return keys;
}
