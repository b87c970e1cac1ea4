/**
 * Records issued credentials durably, in micro-batches.
 *
 * Rows arriving in one turn of the event loop go out together, one `INSERT … SELECT * FROM
 * unnest(…)` of at most `maxBatch` rows. Up to `maxInFlight` statements run at once (each on its
 * own pooled connection): a row never waits behind more than that many commits, and rows that
 * arrive while all are busy go out together when one ends (no timer). Each caller's promise
 * settles when the statement holding its row has committed (or failed): a credential is
 * answered only after its jti is stored.
 *
 * A row of an API key recorded in `revoked_api_keys` (the key was revoked, and its credentials
 * with it, docs/credentials.md "Containment") is not stored: the statement skips it, and its
 * caller is rejected with `ApiKeyRevokedError`. The revocation of a key (RevokeCredentials with
 * `api_key_revoked`) locks the table against these inserts while it records the key and
 * revokes its credentials, so a credential is either stored before
 * it (and revoked by it) or refused after it — a gateway still trusting the key from its cache
 * cannot get one through.
 *
 * Likewise a row signed by a signing key recorded in `revoked_signing_keys` (RevokeSigningKey,
 * docs/credentials.md "Revoking a signing key"): it is not stored and its caller is rejected
 * with `SigningKeyRevokedError` (a replica that has not reloaded its keys yet signed with the
 * revoked key; the issuance signs again with the key that replaced it). The revocation takes the
 * same table lock, so no credential signed by the key is stored after it commits.
 */
import type { KeyMode } from '@relayplane/contract/contract';
import type { Database } from '@relayplane/shared/db';
import { inBatchSpan, type SpanContext, sampledSpanContext } from '@relayplane/shared/tracing';
import { type Kysely, sql } from 'kysely';
import type { IssuerDatabase } from '../db/schema.ts';
import type { RevocationDatabase } from '../revocation/signing-key-revocation-store.ts';

export interface CredentialRow {
  jti: string;
  tenantId: string;
  projectId: string;
  apiKeyId: string;
  kid: string;
  mode: KeyMode;
  /** Space-separated. */
  scopes: string;
  issuedAt: Date;
  expiresAt: Date;
}

/** The row's API key was revoked with its credentials: the credential must not be answered. */
export class ApiKeyRevokedError extends Error {
  readonly apiKeyId: string;
  constructor(apiKeyId: string) {
    super('the API key was revoked');
    this.name = 'ApiKeyRevokedError';
    this.apiKeyId = apiKeyId;
  }
}

/** The row was signed by a revoked signing key: the credential must not be answered. */
export class SigningKeyRevokedError extends Error {
  readonly kid: string;
  constructor(kid: string) {
    super('the signing key was revoked');
    this.name = 'SigningKeyRevokedError';
    this.kid = kid;
  }
}

/** Why the statement skipped a row. */
type Refusal = 'api_key' | 'signing_key';

interface Pending {
  row: CredentialRow;
  resolve: () => void;
  reject: (err: unknown) => void;
  /** The writing issuance's span when traced and sampled: the statement's span links to it. */
  trace: SpanContext | undefined;
}

const MAX_CREDENTIAL_BATCH = 256;
/** Statements in flight at once; the issuer's pool holds more connections than this. */
const MAX_CREDENTIAL_STATEMENTS = 2;

export class CredentialWriter {
  readonly #db: Kysely<IssuerDatabase>;
  readonly #schema: string;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  #queue: Pending[] = [];
  #scheduled = false;
  readonly #running = new Set<Promise<void>>();
  /** Statements executed so far (tests read it to see batching happen). */
  statements = 0;

  readonly #prepared: { run: NonNullable<Database<IssuerDatabase>['prepared']>; text: string } | undefined;

  /**
   * On PostgreSQL the insert is a named prepared statement (parsed and planned once per
   * connection: the hot path's one statement); on PGlite it goes through kysely.
   */
  constructor(
    database: Pick<Database<IssuerDatabase>, 'db' | 'schema' | 'prepared'>,
    options: { maxBatch?: number; maxInFlight?: number } = {},
  ) {
    this.#db = database.db;
    this.#schema = database.schema;
    this.#maxBatch = options.maxBatch ?? MAX_CREDENTIAL_BATCH;
    this.#maxInFlight = options.maxInFlight ?? MAX_CREDENTIAL_STATEMENTS;
    this.#prepared = database.prepared && {
      run: database.prepared,
      text: `insert into "${database.schema}".credentials
        (jti, tenant_id, project_id, api_key_id, kid, mode, scopes, issued_at, expires_at)
        select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
          $7::text[], $8::timestamptz[], $9::timestamptz[])
          as u(jti, tenant_id, project_id, api_key_id, kid, mode, scopes, issued_at, expires_at)
        where not exists (select 1 from "${database.schema}".revoked_api_keys r where r.api_key_id = u.api_key_id)
          and not exists (select 1 from "${database.schema}".revoked_signing_keys k where k.kid = u.kid)`,
    };
  }

  /** Resolves once `row` is committed; rejects when its batch failed (nothing of it is stored). */
  write(row: CredentialRow): Promise<void> {
    const done = new Promise<void>((resolve, reject) =>
      this.#queue.push({ row, resolve, reject, trace: sampledSpanContext() }),
    );
    if (!this.#scheduled && this.#running.size < this.#maxInFlight) {
      this.#scheduled = true;
      // A microtask, not a timer: rows queued by the same turn of the event loop share a batch.
      queueMicrotask(() => {
        this.#scheduled = false;
        this.#start();
      });
    }
    return done;
  }

  /** Resolves when everything queued so far has been written (or failed). */
  async flushed(): Promise<void> {
    while (this.#running.size > 0 || this.#queue.length > 0) {
      if (this.#running.size === 0) this.#start();
      await Promise.all(this.#running);
    }
  }

  /** Starts statements for what is queued, up to `maxInFlight` at once. */
  #start(): void {
    while (this.#queue.length > 0 && this.#running.size < this.#maxInFlight) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      // One span for the statement, linked to every traced issuance in the batch (docs/tracing.md).
      const statement = inBatchSpan(
        'record credentials',
        batch,
        (p) => p.trace,
        undefined,
        () => this.#write(batch),
      ).finally(() => {
        this.#running.delete(statement);
        // What arrived meanwhile goes out now, together.
        this.#start();
      });
      this.#running.add(statement);
    }
  }

  async #write(batch: Pending[]): Promise<void> {
    try {
      const refused = (await this.insert(batch.map((p) => p.row))) || undefined;
      for (const p of batch) {
        const why = refused?.get(p.row.jti);
        if (why === 'signing_key') p.reject(new SigningKeyRevokedError(p.row.kid));
        else if (why === 'api_key') p.reject(new ApiKeyRevokedError(p.row.apiKeyId));
        else p.resolve();
      }
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }

  /**
   * One statement for the whole batch (public so fault-injection tests can replace it).
   * Answers the jtis it refused and why (their API key or their signing key is revoked);
   * nothing when it stored every row.
   */
  async insert(rows: readonly CredentialRow[]): Promise<ReadonlyMap<string, Refusal> | undefined> {
    this.statements++;
    const col = <K extends keyof CredentialRow>(k: K) => rows.map((r) => r[k]);
    // Rows of a batch mostly share their times (same second, same ttl): format each once.
    const iso = (k: 'issuedAt' | 'expiresAt') => {
      let lastMs = Number.NaN;
      let last = '';
      return rows.map((r) => {
        const ms = r[k].getTime();
        if (ms !== lastMs) {
          lastMs = ms;
          last = r[k].toISOString();
        }
        return last;
      });
    };
    if (this.#prepared) {
      const { rowCount } = await this.#prepared.run('relayplane_insert_credentials', this.#prepared.text, [
        col('jti'),
        col('tenantId'),
        col('projectId'),
        col('apiKeyId'),
        col('kid'),
        col('mode'),
        col('scopes'),
        iso('issuedAt'),
        iso('expiresAt'),
      ]);
      return rowCount === rows.length ? undefined : this.#refused(rows);
    }
    const [result] = await this.#db
      .insertInto('credentials')
      .columns([
        'jti',
        'tenant_id',
        'project_id',
        'api_key_id',
        'kid',
        'mode',
        'scopes',
        'issued_at',
        'expires_at',
      ])
      .expression(
        sql`select * from unnest(
          ${col('jti')}::text[], ${col('tenantId')}::text[], ${col('projectId')}::text[],
          ${col('apiKeyId')}::text[], ${col('kid')}::text[], ${col('mode')}::text[],
          ${col('scopes')}::text[], ${iso('issuedAt')}::timestamptz[], ${iso('expiresAt')}::timestamptz[]
        ) as u(jti, tenant_id, project_id, api_key_id, kid, mode, scopes, issued_at, expires_at)
        where not exists (
          select 1 from ${sql.id(this.#schema, 'revoked_api_keys')} r where r.api_key_id = u.api_key_id
        ) and not exists (
          select 1 from ${sql.id(this.#schema, 'revoked_signing_keys')} k where k.kid = u.kid
        )`,
      )
      .execute();
    return Number(result?.numInsertedOrUpdatedRows ?? 0) === rows.length ? undefined : this.#refused(rows);
  }

  /**
   * The rows of a batch the statement skipped (rare: only rows of a revoked API key or signed by
   * a revoked signing key), and why: the signing key when it is revoked, else the API key.
   */
  async #refused(rows: readonly CredentialRow[]): Promise<ReadonlyMap<string, Refusal>> {
    const stored = await this.#db
      .selectFrom('credentials')
      .select('jti')
      .where(
        'jti',
        'in',
        rows.map((r) => r.jti),
      )
      .execute();
    const kept = new Set(stored.map((r) => r.jti));
    const skipped = rows.filter((r) => !kept.has(r.jti));
    const kids = [...new Set(skipped.map((r) => r.kid))];
    const revokedKids = new Set(
      kids.length === 0
        ? []
        : (
            await (this.#db as unknown as Kysely<RevocationDatabase>)
              .selectFrom('revoked_signing_keys')
              .select('kid')
              .where('kid', 'in', kids)
              .execute()
          ).map((r) => r.kid),
    );
    return new Map(skipped.map((r) => [r.jti, revokedKids.has(r.kid) ? 'signing_key' : 'api_key'] as const));
  }
}
