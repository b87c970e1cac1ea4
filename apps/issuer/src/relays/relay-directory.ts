/**
 * The relay registry: registered relays in PostgreSQL (the source of truth), static ones
 * from configuration, and an in-memory copy every replica keeps fresh (bus messages plus a
 * periodic reload) so that assignment never waits on the database.
 */

import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { isId, newId } from '@relayplane/contract/ids';
import { hashToken, newToken, parseToken } from '@relayplane/contract/tokens';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { Kysely } from 'kysely';
import { decodeCursor, encodeCursor, instantOf, pageLimit } from '../common/list-paging.ts';
import type { IssuerDatabase } from '../db/schema.ts';
import { assignRelays, isHealthy } from './relay-assignment.ts';
import type { RelayConfig, StaticRelay } from './relay-config.ts';
import { hostPort, isPort, isRegion, MAX_HOST_LENGTH, normalizeHost, relayUrl } from './relay-fields.ts';
import { type RelayRecord, RelayStore } from './relay-store.ts';

/** Bus channel announcing a change to one relay (message: its id) or to all (`*`). */
export const STATIC_RELAY_MESSAGE = 'static relays are configured in RELAYPLANE_RELAYS_FILE';
const RELAY_NOT_FOUND = 'relay not found';

export interface RelayView {
  id: string;
  region: string;
  host: string;
  port: number;
  /** `https://host:port` (IPv6 hosts in brackets). */
  url: string;
  status: 'healthy' | 'unhealthy';
  load: number;
  static: boolean;
  lastHeartbeatAt?: Date;
  createdAt?: Date;
  /** SHA-256 (hex) of the client certificate it may authenticate with. */
  clientCertificateSha256?: string;
}

/** A certificate fingerprint as registered: 64 hex digits, colons allowed, stored lowercase without them. */
export function certificateFingerprint(value: string): string | undefined {
  const hex = value.replaceAll(':', '').toLowerCase();
  return /^[0-9a-f]{64}$/.test(hex) ? hex : undefined;
}

/**
 * Where a relay page starts: after the first `static` static relays (then the registered
 * ones from the oldest), or after the registered relay `after`.
 */
type RelayCursor = { static: number } | { after: { createdAt: Date; id: string } };

/** A ListRelays cursor as `page` writes it: `{"s": n}` or `{"r": [created_at ms, id]}`. */
function relayCursor(value: unknown): RelayCursor | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { s, r } = value as { s?: unknown; r?: unknown };
  if (Object.keys(value).length !== 1) return undefined;
  // A static relay count: configuration may have shrunk since; past its end, registered ones follow.
  if (typeof s === 'number' && Number.isSafeInteger(s) && s > 0) return { static: s };
  if (Array.isArray(r) && r.length === 2) {
    const createdAt = instantOf(r[0]);
    if (createdAt && typeof r[1] === 'string' && isId('relay', r[1]))
      return { after: { createdAt, id: r[1] } };
  }
  return undefined;
}

export class RelayDirectory {
  readonly #store: RelayStore;
  readonly #db: Kysely<IssuerDatabase>;
  readonly #audit: AuditRecorder;
  readonly #config: RelayConfig;
  readonly #clock: Clock;
  readonly #bus: Bus;
  readonly #logger: Logger;
  readonly #static: ReadonlyMap<string, StaticRelay>;
  readonly #staticAddresses: ReadonlySet<string>;
  #registered = new Map<string, RelayRecord>();
  /** Memory updates run one at a time, in the order their database reads happened. */
  #chain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => Promise<void>) | undefined;
  #stopped = false;

  constructor(
    db: Kysely<IssuerDatabase>,
    config: RelayConfig,
    deps: { clock: Clock; bus: Bus; logger: Logger; audit: AuditRecorder },
  ) {
    this.#store = new RelayStore(db);
    this.#db = db;
    this.#audit = deps.audit;
    this.#config = config;
    this.#clock = deps.clock;
    this.#bus = deps.bus;
    this.#logger = deps.logger;
    this.#static = new Map(config.staticRelays.map((r) => [r.id, r]));
    this.#staticAddresses = new Set(config.staticRelays.map((r) => hostPort(r.host, r.port)));
  }

  /** Loads the registry into memory, then follows changes (bus) and reloads on a timer. */
  async start(): Promise<void> {
    this.#stopped = false;
    // Subscribed before the first load, so no change made meanwhile goes unnoticed.
    this.#unsubscribe = await this.#bus.subscribe(BUS_CHANNELS.relaysChanged, (message) => {
      const id = message.trim();
      (isId('relay', id) ? this.#reloadOne(id) : this.reload()).catch(() => {});
    });
    await this.reload();
    // The bus delivers at most once; the timer bounds how long a lost message matters.
    this.#timer = setInterval(() => this.reload().catch(() => {}), this.#config.refreshIntervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#unsubscribe?.().catch(() => {});
    this.#unsubscribe = undefined;
    await this.#chain;
  }

  /** Rebuilds the in-memory registry from the database. */
  reload(): Promise<void> {
    return this.#serialize('reload', async () => {
      const records = await this.#store.listLive();
      return () => {
        this.#registered = new Map(records.map((record) => [record.id, record]));
      };
    });
  }

  #reloadOne(id: string): Promise<void> {
    return this.#serialize('reload one', async () => {
      const record = await this.#store.getLive(id);
      return () => this.#put(id, record);
    });
  }

  #put(id: string, record: RelayRecord | undefined): void {
    if (record) this.#registered.set(id, record);
    else this.#registered.delete(id);
  }

  /**
   * Runs `read` after every earlier memory update and applies what it returns, so a slow
   * full reload can never overwrite a newer single-relay update with older data.
   */
  #serialize(what: string, read: () => Promise<() => void>): Promise<void> {
    const run = this.#chain.then(async () => {
      if (this.#stopped) return;
      try {
        (await read())();
      } catch (err) {
        this.#logger.warn({ err: { message: (err as Error).message } }, `could not ${what} the relays`);
        throw err;
      }
    });
    this.#chain = run.catch(() => {});
    return run;
  }

  async #announce(id: string): Promise<void> {
    await this.#bus.publish(BUS_CHANNELS.relaysChanged, id).catch((err) => {
      this.#logger.warn(
        { err: { message: (err as Error).message } },
        'could not announce the relay change; replicas pick it up on their next refresh',
      );
    });
  }

  #staticView(relay: StaticRelay): RelayView {
    return {
      id: relay.id,
      region: relay.region,
      host: relay.host,
      port: relay.port,
      url: relayUrl(relay.host, relay.port),
      status: 'healthy',
      load: 0,
      static: true,
    };
  }

  #view(record: RelayRecord, now: Date): RelayView {
    const healthy = isHealthy(
      { static: false, lastHeartbeatAt: record.lastHeartbeatAt ?? undefined },
      now,
      this.#config.healthWindowSeconds,
    );
    const view: RelayView = {
      id: record.id,
      region: record.region,
      host: record.host,
      port: record.port,
      url: relayUrl(record.host, record.port),
      status: healthy ? 'healthy' : 'unhealthy',
      load: record.load,
      static: false,
      createdAt: record.createdAt,
    };
    if (record.lastHeartbeatAt) view.lastHeartbeatAt = record.lastHeartbeatAt;
    if (record.clientCertSha256) view.clientCertificateSha256 = record.clientCertSha256;
    return view;
  }

  /**
   * Hot path, memory only: healthy relays, the requested region first, then least loaded
   * (ties by id), at most `maxAssigned`; fallback = configured entry points + healthy relays
   * of other regions than the first assigned one's.
   */
  assign(region?: string): { relays: RelayView[]; fallback: string[] } {
    const now = this.#clock.now();
    const healthy: RelayView[] = [];
    for (const relay of this.#static.values()) healthy.push(this.#staticView(relay));
    for (const record of this.#registered.values()) {
      const view = this.#view(record, now);
      if (view.status === 'healthy') healthy.push(view);
    }
    const wanted = region?.trim().toLowerCase();
    return assignRelays(healthy, {
      region: wanted ? wanted : undefined,
      maxAssigned: this.#config.maxAssigned,
      fallback: this.#config.fallback,
    });
  }

  /**
   * A registered relay by id: from memory, else read once (registered on another replica a
   * moment ago); undefined when it is not registered (or removed).
   */
  async find(id: string): Promise<RelayView | undefined> {
    if (!isId('relay', id)) return undefined;
    if (!this.#registered.has(id)) await this.#reloadOne(id);
    const record = this.#registered.get(id);
    return record ? this.#view(record, this.#clock.now()) : undefined;
  }

  /** Registers a relay; the token (`rpr_…`) is returned only here and stored as a hash. */
  async register(input: {
    region: string;
    host: string;
    port: number;
    /** Optional ('' or absent: none). */
    clientCertificateSha256?: string;
  }): Promise<{ relay: RelayView; token: string }> {
    const region = typeof input.region === 'string' ? input.region.trim() : '';
    if (!isRegion(region)) {
      throw new AppError(
        'invalid_request',
        'region must be 1-32 characters: lowercase letters, digits and hyphens',
      );
    }
    const host = typeof input.host === 'string' ? normalizeHost(input.host) : undefined;
    if (host === undefined) {
      throw new AppError(
        'invalid_request',
        `host must be a hostname or an IP address of at most ${MAX_HOST_LENGTH} characters`,
      );
    }
    if (!isPort(input.port))
      throw new AppError('invalid_request', 'port must be an integer between 1 and 65535');
    const port = input.port;
    let clientCertSha256: string | null = null;
    if (input.clientCertificateSha256) {
      const fingerprint = certificateFingerprint(input.clientCertificateSha256);
      if (!fingerprint) {
        throw new AppError(
          'invalid_request',
          'client_certificate_sha256 must be the SHA-256 of the certificate: 64 hex digits (colons allowed)',
        );
      }
      if (await this.#store.byClientCertificate(fingerprint))
        throw new AppError('conflict', 'a relay with this client certificate is already registered');
      clientCertSha256 = fingerprint;
    }
    const address = hostPort(host, port);
    const conflict = new AppError('conflict', `a relay at ${address} is already registered`);
    if (this.#staticAddresses.has(address)) throw conflict;
    const token = newToken('relayNode');
    // The relay and its relay.register event commit together (audit or refuse).
    const record = await this.#db.transaction().execute(async (trx: Kysely<IssuerDatabase>) => {
      const inserted = await new RelayStore(trx).insert({
        id: newId('relay'),
        region,
        host,
        port,
        tokenHash: hashToken(token),
        clientCertSha256,
        createdAt: this.#clock.now(),
      });
      if (inserted) {
        await this.#audit.enqueue(trx, {
          action: 'relay.register',
          tenantId: null,
          target: { type: 'relay', id: inserted.id },
          details: {
            region,
            host,
            port,
            ...(clientCertSha256 ? { client_certificate_sha256: clientCertSha256 } : {}),
          },
        });
      }
      return inserted;
    });
    if (!record) throw conflict;
    this.#audit.kick();
    await this.#serialize('add', async () => () => this.#put(record.id, record));
    await this.#announce(record.id);
    this.#logger.info({ relayId: record.id, region, address }, 'relay registered');
    return { relay: this.#view(record, this.#clock.now()), token };
  }

  /** Static relays, then registered ones (oldest first), each with its health now. */
  async list(): Promise<RelayView[]> {
    const records = await this.#store.listLive();
    const now = this.#clock.now();
    return [
      ...[...this.#static.values()].map((r) => this.#staticView(r)),
      ...records.map((record) => this.#view(record, now)),
    ];
  }

  /**
   * One page of `list()`: at most `limit` relays (1..200, 0: 50) after `cursor` (a previous
   * page's `nextCursor`; empty: the first page), and the cursor of the next page (empty after
   * the last). Static relays come from configuration (in memory); registered ones are read a
   * page at a time from PostgreSQL, by (created_at, id) after the last one answered.
   */
  async page(input: { limit: number; cursor: string }): Promise<{ relays: RelayView[]; nextCursor: string }> {
    const limit = pageLimit(input.limit);
    const position = input.cursor ? decodeCursor(input.cursor, relayCursor) : { static: 0 };
    // One more than asked for, to know whether a next page exists.
    const statics =
      'static' in position
        ? [...this.#static.values()].slice(position.static, position.static + limit + 1)
        : [];
    const records =
      statics.length > limit
        ? []
        : await this.#store.listLivePage(
            limit + 1 - statics.length,
            'after' in position ? position.after : undefined,
          );
    const now = this.#clock.now();
    const views = [...statics.map((r) => this.#staticView(r)), ...records.map((r) => this.#view(r, now))];
    if (views.length <= limit) return { relays: views, nextCursor: '' };
    const relays = views.slice(0, limit);
    // Static relays come first: a page that ends on one holds no registered relay.
    const lastRecord = records[limit - statics.length - 1];
    const nextCursor = lastRecord
      ? encodeCursor({ r: [lastRecord.createdAt.getTime(), lastRecord.id] })
      : encodeCursor({ s: ('static' in position ? position.static : 0) + relays.length });
    return { relays, nextCursor };
  }

  /** Soft-deletes a registered relay: it leaves assignment and its token stops working. */
  async remove(id: string): Promise<void> {
    if (this.#static.has(id)) throw new AppError('invalid_request', STATIC_RELAY_MESSAGE);
    if (!isId('relay', id)) throw new AppError('not_found', RELAY_NOT_FOUND);
    const removed = await this.#db.transaction().execute(async (trx: Kysely<IssuerDatabase>) => {
      if (!(await new RelayStore(trx).remove(id, this.#clock.now()))) return false;
      await this.#audit.enqueue(trx, {
        action: 'relay.delete',
        tenantId: null,
        target: { type: 'relay', id },
      });
      return true;
    });
    if (!removed) throw new AppError('not_found', RELAY_NOT_FOUND);
    this.#audit.kick();
    await this.#serialize('remove', async () => () => this.#put(id, undefined));
    await this.#announce(id);
    this.#logger.info({ relayId: id }, 'relay removed');
  }

  /** Resolves a relay node token to its live relay (read from the database, never stale). */
  async authenticate(token: string): Promise<RelayView> {
    if (typeof token !== 'string' || parseToken(token) !== 'relayNode') {
      throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    }
    const record = await this.#store.byTokenHash(hashToken(token));
    if (!record) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    return this.#view(record, this.#clock.now());
  }

  /**
   * Resolves the fingerprint of a client certificate (forwarded by a trusted TLS-terminating
   * proxy) to the live relay registered with it.
   */
  async authenticateCertificate(sha256: string): Promise<RelayView> {
    const fingerprint = typeof sha256 === 'string' ? certificateFingerprint(sha256) : undefined;
    const record = fingerprint && (await this.#store.byClientCertificate(fingerprint));
    if (!record) throw new AppError('unauthenticated', 'no relay is registered with this client certificate');
    return this.#view(record, this.#clock.now());
  }

  /** Records a heartbeat (load 0..1) at the clock's time and tells every replica. */
  async heartbeat(relayId: string, load: number): Promise<RelayView> {
    if (typeof load !== 'number' || !Number.isFinite(load) || load < 0 || load > 1) {
      throw new AppError('invalid_request', 'load must be a number between 0 and 1');
    }
    if (this.#static.has(relayId)) throw new AppError('invalid_request', STATIC_RELAY_MESSAGE);
    if (!isId('relay', relayId)) throw new AppError('not_found', RELAY_NOT_FOUND);
    const record = await this.#store.heartbeat(relayId, load, this.#clock.now());
    if (!record) throw new AppError('not_found', RELAY_NOT_FOUND);
    await this.#serialize('update', async () => () => this.#put(record.id, record));
    await this.#announce(record.id);
    return this.#view(record, this.#clock.now());
  }
}
