/** Registered relays in PostgreSQL, the source of truth of the relay registry. */
import type { Kysely, Selectable } from 'kysely';
import type { IssuerDatabase, RelaysTable } from '../db/schema.ts';

/** A live (not removed) registered relay. */
export interface RelayRecord {
  id: string;
  region: string;
  host: string;
  port: number;
  load: number;
  lastHeartbeatAt: Date | null;
  createdAt: Date;
  /** SHA-256 (hex) of its client certificate; null: none. */
  clientCertSha256: string | null;
}

const COLUMNS = [
  'id',
  'region',
  'host',
  'port',
  'load',
  'last_heartbeat_at',
  'created_at',
  'client_cert_sha256',
] as const;
type RecordRow = Pick<Selectable<RelaysTable>, (typeof COLUMNS)[number]>;

function toRecord(row: RecordRow): RelayRecord {
  return {
    id: row.id,
    region: row.region,
    host: row.host,
    port: row.port,
    load: Number(row.load),
    lastHeartbeatAt: row.last_heartbeat_at,
    createdAt: row.created_at,
    clientCertSha256: row.client_cert_sha256,
  };
}

export class RelayStore {
  readonly #db: Kysely<IssuerDatabase>;

  constructor(db: Kysely<IssuerDatabase>) {
    this.#db = db;
  }

  /** Every live relay, oldest first. */
  async listLive(): Promise<RelayRecord[]> {
    const rows = await this.#db
      .selectFrom('relays')
      .select(COLUMNS)
      .where('deleted_at', 'is', null)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toRecord);
  }

  /**
   * At most `limit` live relays, oldest first (created_at, then id), after `after` (the last
   * one of the previous page): a keyset page, so relays registered or removed meanwhile
   * neither repeat nor shift the rest.
   */
  async listLivePage(limit: number, after?: { createdAt: Date; id: string }): Promise<RelayRecord[]> {
    let query = this.#db
      .selectFrom('relays')
      .select(COLUMNS)
      .where('deleted_at', 'is', null)
      .orderBy('created_at')
      .orderBy('id')
      .limit(limit);
    if (after) {
      query = query.where((eb) =>
        eb.or([
          eb('created_at', '>', after.createdAt),
          eb.and([eb('created_at', '=', after.createdAt), eb('id', '>', after.id)]),
        ]),
      );
    }
    return (await query.execute()).map(toRecord);
  }

  async getLive(id: string): Promise<RelayRecord | undefined> {
    const row = await this.#db
      .selectFrom('relays')
      .select(COLUMNS)
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row && toRecord(row);
  }

  /** Inserts a relay; undefined when a live relay already has its address. */
  async insert(relay: {
    id: string;
    region: string;
    host: string;
    port: number;
    tokenHash: string;
    clientCertSha256: string | null;
    createdAt: Date;
  }): Promise<RelayRecord | undefined> {
    // `do nothing` rather than catching the violation: the insert runs inside the transaction
    // that also writes its audit event, which a failed statement would abort.
    const row = await this.#db
      .insertInto('relays')
      .values({
        id: relay.id,
        region: relay.region,
        host: relay.host,
        port: relay.port,
        token_hash: relay.tokenHash,
        client_cert_sha256: relay.clientCertSha256,
        load: 0,
        last_heartbeat_at: null,
        created_at: relay.createdAt,
        deleted_at: null,
      })
      .onConflict((oc) => oc.doNothing())
      .returning(COLUMNS)
      .executeTakeFirst();
    return row && toRecord(row);
  }

  /** Soft-deletes a live relay; false when there was none. */
  async remove(id: string, now: Date): Promise<boolean> {
    const removed = await this.#db
      .updateTable('relays')
      .set({ deleted_at: now })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    return removed !== undefined;
  }

  /** The live relay registered with the client certificate of SHA-256 `sha256` (lowercase hex). */
  async byClientCertificate(sha256: string): Promise<RelayRecord | undefined> {
    const row = await this.#db
      .selectFrom('relays')
      .select(COLUMNS)
      .where('client_cert_sha256', '=', sha256)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row && toRecord(row);
  }

  /** The live relay whose node token hashes to `tokenHash`. */
  async byTokenHash(tokenHash: string): Promise<RelayRecord | undefined> {
    const row = await this.#db
      .selectFrom('relays')
      .select(COLUMNS)
      .where('token_hash', '=', tokenHash)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row && toRecord(row);
  }

  /** Records a live relay's load and heartbeat time; undefined when there is no such relay. */
  async heartbeat(id: string, load: number, now: Date): Promise<RelayRecord | undefined> {
    const row = await this.#db
      .updateTable('relays')
      .set({ load, last_heartbeat_at: now })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .returning(COLUMNS)
      .executeTakeFirst();
    return row && toRecord(row);
  }
}
