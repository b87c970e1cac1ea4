/**
 * The signing keys of one issuer replica: the key set in PostgreSQL (shared by every replica),
 * its maintenance (scheduled rotation, next-key creation, removal, on-demand rotation) and the
 * in-memory key ring that signs credentials and serves the JWKS.
 *
 * Every replica keeps its ring equal to the stored set: a replica that changes the set
 * announces it on the bus and every replica (itself included) reloads; since the bus delivers
 * at most once, a timer reloads as well, bounding how long a lost message can matter. Reloads
 * never overlap, so a slow one cannot overwrite a newer one.
 *
 * KEK rotation: the private halves are sealed under `RELAYPLANE_KEK`; keys sealed under one of
 * `RELAYPLANE_KEK_PREVIOUS` still open (the row's fingerprint picks the KEK), and maintenance
 * re-encrypts them under the current one. A gauge counts the live keys not yet re-encrypted.
 */
import type { KeyObject } from 'node:crypto';
import { BUS_CHANNELS } from '@relayplane/contract/contract';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import { ConfigError } from '@relayplane/shared/config';
import type { Logger } from '@relayplane/shared/logger';
import { type Counter, counter, type Gauge, gauge, type Registry } from '@relayplane/shared/metrics';
import type { Kysely } from 'kysely';
import { decodeCursor, encodeCursor, instantOf, pageLimit } from '../common/list-paging.ts';
import type { IssuerDatabase } from '../db/schema.ts';
import { type SigningKeyStateMetrics, signingKeyStateMetrics } from '../metrics.ts';
import { compareKeys, type IssuerKeysConfig, keyState, STATE_ORDER } from './key-lifecycle.ts';
import { KeyMaintenance, type MaintenanceResult } from './key-maintenance.ts';
import { KekSet } from './key-material.ts';
import { type ActiveSigningKey, type JwksDocument, KeyRing } from './key-ring.ts';
import { type KeyListPosition, SigningKeyStore, type StoredKey } from './signing-key-store.ts';

export type KeysReloadReason = 'tick' | 'bus' | 'refresh';

export interface KeysReloadedEvent {
  reason: KeysReloadReason;
  /** True when the published key set differs from before the reload. */
  changed: boolean;
  jwks: JwksDocument;
}

export interface SigningKeyListing {
  keys: StoredKey[];
  rotationPendingSince: Date | null;
}

export interface SigningKeyPage extends SigningKeyListing {
  /** Empty after the last page. */
  nextCursor: string;
}

/** A key's latest change, the listing's order within a state (`compareKeys`). */
function lastChange(key: StoredKey): Date {
  return key.removedAt ?? key.deactivatedAt ?? key.activatedAt ?? key.createdAt;
}

const KID = /^[A-Za-z0-9_-]{1,128}$/;

/** A ListSigningKeys cursor as `page` writes it: `[rank, changed ms, created ms, kid]`. */
function keyCursor(value: unknown): KeyListPosition | undefined {
  if (!Array.isArray(value) || value.length !== 4) return undefined;
  const [rank, changed, created, kid] = value as unknown[];
  const changedAt = instantOf(changed);
  const createdAt = instantOf(created);
  if (!Object.values(STATE_ORDER).includes(rank as number) || !changedAt || !createdAt) return undefined;
  if (typeof kid !== 'string' || !KID.test(kid)) return undefined;
  return { rank: rank as number, changedAt, createdAt, kid };
}

export class SigningKeys {
  readonly #store: SigningKeyStore;
  readonly #ring: KeyRing;
  readonly #maintenance: KeyMaintenance;
  readonly #keks: KekSet;
  /** `relayplane_issuer_signing_keys_sealed_by_previous_kek`, set at every reload. */
  readonly #sealedByPrevious: Gauge | undefined;
  /** `relayplane_issuer_signing_keys_resealed_total`. */
  readonly #resealed: Counter | undefined;
  /** Keys by state and the rotation due time, set at every reload. */
  readonly #state: SigningKeyStateMetrics | undefined;
  readonly #rotationIntervalSeconds: number;
  readonly #refreshIntervalMs: number;
  readonly #clock: Clock;
  readonly #bus: Bus;
  readonly #logger: Logger;
  readonly #listeners = new Set<(event: KeysReloadedEvent) => void>();
  #reloadChain: Promise<void> = Promise.resolve();
  #unsubscribe: (() => Promise<void>) | undefined;
  #refreshTimer: NodeJS.Timeout | undefined;

  constructor(deps: {
    db: Kysely<IssuerDatabase>;
    /** The current KEK (`RELAYPLANE_KEK`): seals every key written. */
    kek: Buffer;
    /** Earlier KEKs (`RELAYPLANE_KEK_PREVIOUS`): open the keys they sealed, until re-encrypted. */
    previousKeks?: readonly Buffer[];
    policy: IssuerKeysConfig;
    clock: Clock;
    bus: Bus;
    logger: Logger;
    /** The audit outbox: every rotation commits with its `signing_key.rotate` event. */
    audit: AuditRecorder;
    /** The service's registry, for the KEK rotation metrics (none without it). */
    metrics?: Registry;
  }) {
    this.#store = new SigningKeyStore(deps.db);
    this.#keks = new KekSet(deps.kek, deps.previousKeks);
    this.#ring = new KeyRing(this.#keks.current);
    this.#maintenance = new KeyMaintenance({
      store: this.#store,
      keks: this.#keks,
      policy: deps.policy,
      logger: deps.logger,
      audit: deps.audit,
    });
    if (deps.metrics) {
      this.#sealedByPrevious = gauge(deps.metrics, {
        name: 'relayplane_issuer_signing_keys_sealed_by_previous_kek',
        help: 'Signing keys still in the JWKS whose private half is sealed by a key-encryption key other than RELAYPLANE_KEK (0: the previous KEKs can be dropped).',
      });
      this.#resealed = counter(deps.metrics, {
        name: 'relayplane_issuer_signing_keys_resealed_total',
        help: 'Signing keys this issuer re-encrypted from a previous key-encryption key under RELAYPLANE_KEK.',
      });
      this.#state = signingKeyStateMetrics(deps.metrics);
    }
    this.#rotationIntervalSeconds = deps.policy.rotationIntervalSeconds;
    this.#refreshIntervalMs = deps.policy.maintenanceIntervalSeconds * 1000;
    this.#clock = deps.clock;
    this.#bus = deps.bus;
    this.#logger = deps.logger;
  }

  /**
   * Checks the KEK against the stored keys, follows key changes, runs a first maintenance
   * tick (creating the first keys on an empty database) and loads the ring.
   */
  async start(): Promise<void> {
    await this.#assertKek();
    // Subscribed before the first tick, so no change made meanwhile goes unnoticed.
    this.#unsubscribe = await this.#bus.subscribe(BUS_CHANNELS.signingKeysChanged, () => {
      this.reload('bus').catch(() => {});
    });
    await this.tick();
    this.#refreshTimer = setInterval(() => this.reload('refresh').catch(() => {}), this.#refreshIntervalMs);
    this.#refreshTimer.unref();
  }

  /** Stops following changes and waits for the reload in progress. */
  async stop(): Promise<void> {
    clearInterval(this.#refreshTimer);
    await this.#unsubscribe?.().catch(() => {});
    this.#unsubscribe = undefined;
    await this.#reloadChain;
  }

  /** The published key set, from memory: keys, exact body and strong ETag. */
  jwks(): JwksDocument {
    return this.#ring.jwks();
  }

  /** The key that signs now (cached KeyObject). Throws before `start`. */
  activeSigningKey(): ActiveSigningKey {
    const active = this.#ring.activeKey();
    if (!active) throw new Error('issuer not started: no active signing key loaded');
    return active;
  }

  /** The ring credentials are signed and verified with. */
  get ring(): KeyRing {
    return this.#ring;
  }

  /**
   * One maintenance tick at the clock's current time (the scheduled job calls this). When
   * it changed anything, tells every replica; then reloads this replica's ring.
   */
  async tick(): Promise<MaintenanceResult> {
    return this.#afterMaintenance(await this.#maintenance.run(this.#clock.now()));
  }

  /** Fingerprints of the configured KEKs: the current one and the previous ones. */
  get kekFingerprints(): { current: string; previous: readonly string[] } {
    return { current: this.#keks.currentFingerprint, previous: this.#keks.previousFingerprints };
  }

  /** Records an on-demand rotation and runs a tick at once. */
  async rotate(requestedBy: string): Promise<MaintenanceResult> {
    return this.#afterMaintenance(await this.#maintenance.run(this.#clock.now(), { requestedBy }));
  }

  async #afterMaintenance(result: MaintenanceResult): Promise<MaintenanceResult> {
    if (result.resealed.length) this.#resealed?.inc(result.resealed.length);
    if (result.changed) {
      await this.#bus
        .publish(BUS_CHANNELS.signingKeysChanged, this.#clock.now().toISOString())
        .catch((err) => {
          this.#logger.warn(
            { err: { message: (err as Error).message } },
            'could not announce the key change; replicas pick it up on their next refresh',
          );
        });
    }
    await this.reload('tick');
    return result;
  }

  /** Every key (removed ones too) in listing order, plus the pending rotation request. */
  async list(): Promise<SigningKeyListing> {
    const [keys, request] = await Promise.all([this.#store.list(), this.#store.rotationRequest()]);
    return { keys: keys.sort(compareKeys), rotationPendingSince: request?.requestedAt ?? null };
  }

  /**
   * One page of `list()`: at most `limit` keys (1..200, 0: 50) after `cursor` (a previous
   * page's `nextCursor`; empty: the first page), the pending rotation request, and the cursor
   * of the next page (empty after the last). A key whose state changes between two pages
   * (a rotation, a removal) moves in the order and may be listed twice or not at all.
   */
  async page(input: { limit: number; cursor: string }): Promise<SigningKeyPage> {
    const limit = pageLimit(input.limit);
    const after = input.cursor ? decodeCursor(input.cursor, keyCursor) : undefined;
    const [keys, request] = await Promise.all([
      this.#store.listPage(limit + 1, after),
      this.#store.rotationRequest(),
    ]);
    const page = keys.slice(0, limit);
    const last = page[page.length - 1];
    return {
      keys: page,
      rotationPendingSince: request?.requestedAt ?? null,
      nextCursor:
        keys.length > limit && last
          ? encodeCursor([
              STATE_ORDER[keyState(last)],
              lastChange(last).getTime(),
              last.createdAt.getTime(),
              last.kid,
            ])
          : '',
    };
  }

  /**
   * Decrypts a stored private key (undefined once removed). In-process only — never
   * served over RPC; tests use it to prove what is and is not stored.
   */
  async privateKey(kid: string): Promise<KeyObject | undefined> {
    const key = await this.#store.get(kid);
    if (!key?.sealed) return undefined;
    return this.#keks.open(key.sealed, key.kekFingerprint, key.kid, key.x);
  }

  /** Listens to every ring reload; returns a function that stops listening. */
  onReloaded(listener: (event: KeysReloadedEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Rebuilds the ring from the database (reloads never overlap). */
  reload(reason: KeysReloadReason): Promise<void> {
    const run = this.#reloadChain.then(async () => {
      try {
        const live = await this.#store.listLive();
        const current = this.#keks.currentFingerprint;
        this.#sealedByPrevious?.set(live.filter((k) => k.sealed && k.kekFingerprint !== current).length);
        if (this.#state) this.#exposeState(live);
        const changed = this.#ring.load(live.map((k) => this.#underCurrentKek(k)));
        if (changed) {
          this.#logger.info({ reason, activeKid: this.#ring.activeKey()?.kid }, 'signing key set reloaded');
        }
        const event = { reason, changed, jwks: this.#ring.jwks() };
        for (const listener of this.#listeners) listener(event);
      } catch (err) {
        this.#logger.error({ err, reason }, 'could not reload the signing keys');
        throw err;
      }
    });
    this.#reloadChain = run.catch(() => {});
    return run;
  }

  /** What operators alert on: a JWKS without a next key, a rotation that did not happen. */
  #exposeState(live: readonly StoredKey[]): void {
    const state = this.#state;
    if (!state) return;
    const counts = { next: 0, active: 0, previous: 0, removed: 0 };
    let active: StoredKey | undefined;
    for (const key of live) {
      const s = keyState(key);
      counts[s]++;
      if (s === 'active') active = key;
    }
    state.keys.labels('next').set(counts.next);
    state.keys.labels('active').set(counts.active);
    state.keys.labels('previous').set(counts.previous);
    if (active) {
      const since = (active.activatedAt ?? active.createdAt).getTime();
      state.rotationDue.set(since / 1000 + this.#rotationIntervalSeconds);
    }
  }

  /**
   * The ring opens keys with the current KEK only: a key still sealed by a previous one (until
   * maintenance re-encrypts it, normally the same tick) is handed to it re-sealed in memory.
   */
  #underCurrentKek(key: StoredKey): StoredKey {
    if (!key.sealed || key.kekFingerprint === this.#keks.currentFingerprint) return key;
    if (!this.#keks.byFingerprint(key.kekFingerprint)) return key;
    try {
      return {
        ...key,
        ...this.#keks.seal(this.#keks.open(key.sealed, key.kekFingerprint, key.kid, key.x), key.kid),
      };
    } catch {
      // Unopenable: as stored, so the ring's own error names it should it be the active key.
      return key;
    }
  }

  /**
   * Refuses to start (a configuration error: exit 78) when a stored private half was sealed by a
   * KEK that is neither `RELAYPLANE_KEK` nor one of `RELAYPLANE_KEK_PREVIOUS`, naming the
   * fingerprints found and configured. Runs before the first maintenance tick, so a wrong KEK
   * never leads to a replacement key set.
   */
  async #assertKek(): Promise<void> {
    const { currentFingerprint: configured, previousFingerprints: previous } = this.#keks;
    const stored = (await this.#store.kekFingerprints()).filter((f) => !this.#keks.byFingerprint(f));
    if (stored.length) {
      const also = previous.length ? `, previous ${previous.join(', ')}` : '';
      throw new ConfigError(
        'RELAYPLANE_KEK',
        `does not match the key-encryption key that sealed the stored signing keys (stored key fingerprint ${stored.join(', ')}, configured ${configured}${also}); start with the key they were sealed with as RELAYPLANE_KEK, or, while rotating it, in RELAYPLANE_KEK_PREVIOUS`,
      );
    }
  }
}
