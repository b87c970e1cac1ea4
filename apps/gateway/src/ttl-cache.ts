/**
 * A small read-through cache with a hard time-to-live, single-flight loads and explicit
 * invalidation. Used for API-key verification and tenant entitlements: entries never outlive
 * `ttlMs`, so a change is effective on every gateway replica within that bound even if an
 * invalidation message is lost; the bus makes it immediate.
 */
interface Entry<V> {
  value: Promise<V>;
  expires: number;
  /** Set once `value` resolved: what `peek` answers. */
  loaded?: { value: V };
}

export class TtlCache<K, V> {
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #entries = new Map<K, Entry<V>>();

  constructor(ttlMs: number, maxEntries = 100_000) {
    this.#ttlMs = ttlMs;
    this.#maxEntries = maxEntries;
  }

  /**
   * The value for `key` if it is loaded and fresh, without waiting: the hot paths take it
   * synchronously and fall back to `get` on a miss.
   */
  peek(key: K, now = Date.now()): V | undefined {
    const hit = this.#entries.get(key);
    return hit?.loaded && hit.expires > now ? hit.loaded.value : undefined;
  }

  get(key: K, load: (key: K) => Promise<V>, now = Date.now()): Promise<V> {
    const hit = this.#entries.get(key);
    if (hit && hit.expires > now) return hit.value;
    if (this.#entries.size >= this.#maxEntries) this.#evict(now);
    const value = load(key);
    const entry: Entry<V> = { value, expires: now + this.#ttlMs };
    this.#entries.set(key, entry);
    // Failures (including "unknown key") are cached for the same short time; transient
    // errors from a downstream service are not.
    value.then(
      (v) => {
        entry.loaded = { value: v };
      },
      (err: unknown) => {
        if (this.#entries.get(key) === entry && !isCacheableFailure(err)) this.#entries.delete(key);
      },
    );
    return value;
  }

  delete(key: K): void {
    this.#entries.delete(key);
  }

  /** Drops every loaded entry whose value matches (a scan: for rare invalidations only). */
  deleteWhere(matches: (value: V) => boolean): void {
    for (const [k, e] of this.#entries) if (e.loaded && matches(e.loaded.value)) this.#entries.delete(k);
  }

  clear(): void {
    this.#entries.clear();
  }

  #evict(now: number): void {
    for (const [k, e] of this.#entries) if (e.expires <= now) this.#entries.delete(k);
    // Still full: drop the oldest insertions (Map iterates in insertion order).
    const excess = this.#entries.size - Math.floor(this.#maxEntries * 0.9);
    if (excess > 0) {
      let n = 0;
      for (const k of this.#entries.keys()) {
        if (n++ >= excess) break;
        this.#entries.delete(k);
      }
    }
  }
}

function isCacheableFailure(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'unauthenticated' || code === 'not_found';
}
