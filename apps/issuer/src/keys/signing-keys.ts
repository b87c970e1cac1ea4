/**
 * The signing keys of one issuer replica: the key set in PostgreSQL (shared by every replica),
 * its maintenance (scheduled rotation, next-key creation, removal, on-demand rotation) and the
 * in-memory key ring that signs credentials and serves the JWKS.
 *
 * Every replica keeps its ring equal to the stored set: a replica that changes the set
 * announces it on the bus and every replica (itself included) reloads; since the bus delivers
 * at most once, a timer reloads as well, bounding how long a lost message can matter. Reloads
 * never overlap, so a slow one cannot overwrite a newer one.
 */
import type { KeyObject } from 'node:crypto';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import { ConfigError } from '@relayplane/shared/config';
import { BUS_CHANNELS } from '@relayplane/shared/contract';
import type { Logger } from '@relayplane/shared/logger';
import type { Kysely } from 'kysely';
import type { IssuerKeysConfig } from '../config.ts';
import type { IssuerDatabase } from '../db/schema.ts';
import { compareKeys, keyState, STATE_ORDER } from '../domain/key-lifecycle.ts';
import { decodeCursor, encodeCursor, instantOf, pageLimit } from '../domain/list-paging.ts';
import { type KeyListPosition, SigningKeyStore, type StoredKey } from '../stores/signing-keys.ts';
import { KeyMaintenance, type MaintenanceResult } from './key-maintenance.ts';
import { kekFingerprint, openPrivateKey } from './key-material.ts';
import { type ActiveSigningKey, type JwksDocument, KeyRing } from './key-ring.ts';

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
  readonly #kek: Buffer;
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
    kek: Buffer;
    policy: IssuerKeysConfig;
    clock: Clock;
    bus: Bus;
    logger: Logger;
    /** The audit outbox: every rotation commits with its `signing_key.rotate` event. */
    audit: AuditRecorder;
  }) {
    this.#store = new SigningKeyStore(deps.db);
    this.#ring = new KeyRing(deps.kek);
    this.#maintenance = new KeyMaintenance({
      store: this.#store,
      kek: deps.kek,
      policy: deps.policy,
      logger: deps.logger,
      audit: deps.audit,
    });
    this.#kek = deps.kek;
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

  /** Records an on-demand rotation and runs a tick at once. */
  async rotate(requestedBy: string): Promise<MaintenanceResult> {
    return this.#afterMaintenance(await this.#maintenance.run(this.#clock.now(), { requestedBy }));
  }

  async #afterMaintenance(result: MaintenanceResult): Promise<MaintenanceResult> {
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
    return openPrivateKey(key.sealed, this.#kek, key.kid, key.x);
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
        const changed = this.#ring.load(await this.#store.listLive());
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

  async #assertKek(): Promise<void> {
    const configured = kekFingerprint(this.#kek);
    const stored = (await this.#store.kekFingerprints()).filter((f) => f !== configured);
    if (stored.length) {
      throw new ConfigError(
        'RELAYPLANE_KEK',
        `does not match the key-encryption key that sealed the stored signing keys (stored key fingerprint ${stored.join(', ')}, configured ${configured}); start with the key they were created with`,
      );
    }
  }
}
