/**
 * Relay credentials: issuance (slot → sign → record → answer), revocation, verification
 * (introspection and relay re-assignment) and the revocation feed.
 *
 * Invariants:
 * - A credential is answered only after its jti row committed (CredentialWriter).
 * - Every answered credential holds one slot of its tenant; a failed issuance releases the
 *   slot it reserved, and a refused or failed one never answers a token.
 * - The slot store failing means refusal (`unavailable`), never a credential and never 402.
 * - Postgres is the truth about revocation; Redis only mirrors it.
 * - Postgres is the truth about slots too: the credentials table is the ledger a lost slot set
 *   is rebuilt from. A slot reserved before the row committed is confirmed after it committed
 *   (a rebuild in between did not count it); a refused confirmation withdraws the recorded
 *   credential (revoked_at set, so no later rebuild counts it) and answers the cap's 402.
 */

import type { KeyObject } from 'node:crypto';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import { BUS_CHANNELS } from '@relayplane/shared/contract';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { Logger } from '@relayplane/shared/logger';
import type { CredentialsConfig } from '../config.ts';
import { type IssueInput, issueRequest, requestedRegion } from '../domain/credential-request.ts';
import type { ActiveSigningKey } from '../keys/key-ring.ts';
import type { IssuerMetrics } from '../metrics.ts';
import type { RelayView } from '../relays/relay-directory.ts';
import {
  ApiKeyRevokedError,
  type CredentialWriter,
  SigningKeyRevokedError,
} from '../stores/credential-writer.ts';
import {
  BULK_REVOKE_LOCK_TIMEOUT_MS,
  type CredentialListing,
  type CredentialStore,
  LOCK_NOT_AVAILABLE,
  type RevocationEntry,
  type WatermarkEntry,
} from '../stores/credentials.ts';
import type { RedisRevocationMarks } from '../stores/revocation-marks.ts';
import type { KeyRevocation, RevokedKeyEntry } from '../stores/signing-key-revocations.ts';
import { SlotLedgerUnavailableError, type SlotStore } from '../stores/slot-store.ts';
import { type CredentialClaims, isJti, newJti, signCredential, verifyCredential } from './jwt.ts';

/** Bus channel announcing a new revocation (long-polls of every replica wake on it). */

const DEFAULT_REVOCATIONS_LIMIT = 100;
const MAX_REVOCATIONS_LIMIT = 1000;
const MAX_REVOCATIONS_WAIT_MS = 30_000;
/** A long-poll re-reads the feed at least this often, so a lost bus message delays by at most this. */
const FEED_RECHECK_MS = 1_000;

const SLOTS_UNAVAILABLE_MESSAGE = 'concurrency limits are unavailable; retry shortly';
const RECORD_UNAVAILABLE_MESSAGE = 'credentials cannot be recorded right now; retry shortly';
const CREDENTIAL_NOT_FOUND_MESSAGE = 'credential not found';
const BULK_REVOKE_BUSY_MESSAGE = `the credentials could not be locked for revocation within ${BULK_REVOKE_LOCK_TIMEOUT_MS / 1000} s; nothing was changed, retry shortly`;

export interface IssuedCredential {
  token: string;
  jti: string;
  claims: CredentialClaims;
  expiresAt: Date;
  relays: RelayView[];
  fallback: string[];
}

export interface RevokedCredential {
  jti: string;
  revokedAt: Date;
}

export interface RevocationPage {
  revocations: RevocationEntry[];
  nextCursor: bigint;
  /** Project watermarks in force (docs/credentials.md, "Containment"). */
  watermarks: WatermarkEntry[];
  /** Signing key revocations in force (docs/credentials.md, "Revoking a signing key"). */
  revokedKeys: RevokedKeyEntry[];
}

/** RevokeCredentials: a project's credentials by API key and/or issue time (at least one). */
export interface BulkRevokeInput {
  tenantId: string;
  projectId: string;
  /** Empty: any key. */
  apiKeyId: string;
  /** The key itself is being revoked: record it, so it obtains no credential afterwards. */
  apiKeyRevoked?: boolean;
  issuedBefore?: Date;
}

export interface CredentialPage {
  credentials: CredentialListing[];
  /** Empty on the last page. */
  nextCursor: string;
}

const DEFAULT_CREDENTIALS_LIMIT = 50;
const MAX_CREDENTIALS_LIMIT = 200;
/** Redis follow-ups of a bulk revocation run this many at once (marks, then slot releases). */
const FOLLOW_UP_CHUNK = 256;
/** A watermark is sent in the feed this long past its instant: every credential it refuses has expired by then (plus leeway). */
const WATERMARK_SLACK_MS = 60_000;
/**
 * How long an issuance whose signing key was revoked meanwhile waits for this replica's key
 * ring to load the key that replaced it (the revoking replica's bus message) before it answers
 * `unavailable`. The ring is reloaded on that message within milliseconds.
 */
const REPLACED_KEY_WAIT_MS = 2_000;
const REPLACED_KEY_POLL_MS = 5;
const SIGNING_KEY_NOT_FOUND_MESSAGE = 'signing key not found';
const KID = /^[A-Za-z0-9_-]{1,128}$/;
const KEY_REVOKE_BUSY_MESSAGE =
  'the credentials could not be locked for the signing key revocation in time; nothing was changed, retry shortly';

export interface CredentialDeps {
  config: CredentialsConfig;
  /** Upper bound of ttl_seconds: the key policy's longest credential lifetime. */
  maxTtlSeconds: number;
  clock: Clock;
  logger: Logger;
  bus: Bus;
  slots: SlotStore;
  /** Null in embedded mode (no Redis): revocation checks go to Postgres. */
  marks: RedisRevocationMarks | null;
  writer: CredentialWriter;
  store: CredentialStore;
  keys: {
    activeKey(): ActiveSigningKey | undefined;
    verificationKey(kid: string): KeyObject | undefined;
  };
  relays: { assign(region?: string): { relays: RelayView[]; fallback: string[] } };
  /** Signs the JWT (replaceable for fault-injection tests). */
  sign?: typeof signCredential;
  /** Issuance and revocation counters; absent: nothing is counted. */
  metrics?: IssuerMetrics;
  /** The audit outbox: a revocation commits only together with its `credential.revoke` event. */
  audit: AuditRecorder;
}

export class Credentials {
  readonly #d: CredentialDeps;
  readonly #sign: typeof signCredential;
  readonly #waiters = new Set<() => void>();
  #unsubscribe: (() => Promise<void>) | undefined;
  #stopped = false;

  constructor(deps: CredentialDeps) {
    this.#d = deps;
    this.#sign = deps.sign ?? signCredential;
    // The rows this class records before answering are what a lost slot set is rebuilt from.
    deps.slots.recoverFrom(deps.store);
  }

  /** Follows revocations made by other replicas (wakes long-polls). */
  async start(): Promise<void> {
    this.#stopped = false;
    this.#unsubscribe = await this.#d.bus.subscribe(BUS_CHANNELS.credentialsRevoked, () => this.#wake());
  }

  /** Stops following the bus and ends waiting long-polls (they answer what they have). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#wake();
    await this.#unsubscribe?.().catch(() => {});
    this.#unsubscribe = undefined;
  }

  // ---------------------------------------------------------------- issuance

  async issue(input: IssueInput, signal?: AbortSignal): Promise<IssuedCredential> {
    const metrics = this.#d.metrics;
    if (!metrics) return this.#issueWithLiveKey(input, signal);
    try {
      const issued = await this.#issueWithLiveKey(input, signal);
      metrics.issued.inc();
      return issued;
    } catch (err) {
      metrics.failure(err instanceof AppError ? err.code : 'internal');
      throw err;
    }
  }

  /**
   * `#issue`, once more when its signing key was revoked between signing and recording (this
   * replica's ring had not reloaded yet): after the ring holds another active key, signed with it.
   */
  async #issueWithLiveKey(input: IssueInput, signal?: AbortSignal): Promise<IssuedCredential> {
    try {
      return await this.#issue(input, signal);
    } catch (err) {
      if (!(err instanceof SigningKeyRevokedError)) throw err;
      await this.#replacedKey(err.kid, signal);
      try {
        return await this.#issue(input, signal);
      } catch (again) {
        if (again instanceof SigningKeyRevokedError) throw revokedKeyUnavailable(again);
        throw again;
      }
    }
  }

  /** Waits (up to REPLACED_KEY_WAIT_MS) until the ring's active key is not `kid`. */
  async #replacedKey(kid: string, signal?: AbortSignal): Promise<void> {
    const deadline = performance.now() + REPLACED_KEY_WAIT_MS;
    for (;;) {
      const active = this.#d.keys.activeKey();
      if (active && active.kid !== kid) return;
      if (performance.now() >= deadline || signal?.aborted) {
        throw revokedKeyUnavailable(new SigningKeyRevokedError(kid));
      }
      await new Promise((resolve) => setTimeout(resolve, REPLACED_KEY_POLL_MS));
    }
  }

  async #issue(input: IssueInput, signal?: AbortSignal): Promise<IssuedCredential> {
    const req = issueRequest(input, this.#d.maxTtlSeconds);
    const key = this.#d.keys.activeKey();
    if (!key)
      throw new AppError('unavailable', 'no signing key is loaded yet; retry shortly', {
        retryAfterSeconds: 1,
      });
    const jti = newJti();
    const ttlMs = req.ttlSeconds * 1000;

    let granted: boolean;
    try {
      const reservation = await this.#d.slots.reserve(req.tenantId, jti, ttlMs, req.cap);
      granted = reservation.granted;
      this.#d.metrics?.slots.record(req.tenantId, reservation.inUse, req.cap);
    } catch (err) {
      // The script may have run before the reply was lost: free what it may have taken.
      this.#releaseQuietly(req.tenantId, jti, 'reserve failed');
      throw slotsUnavailable(err);
    }
    if (!granted) throw capReached(req.cap);

    const iat = Math.floor(this.#d.clock.now().getTime() / 1000);
    const claims: CredentialClaims = {
      iss: this.#d.config.issuer,
      sub: req.projectId,
      aud: this.#d.config.audience,
      jti,
      iat,
      nbf: iat,
      exp: iat + req.ttlSeconds,
      tid: req.tenantId,
      pid: req.projectId,
      scope: req.scope,
      mode: req.mode,
      akid: req.apiKeyId,
    };
    if (req.region) claims.rgn = req.region;

    let token: string;
    try {
      token = this.#sign(key.header, claims, key.privateKey);
    } catch (err) {
      await this.#release(req.tenantId, jti, 'signing failed');
      throw new AppError('internal', 'the credential could not be signed', { cause: err });
    }
    const expiresAt = new Date(claims.exp * 1000);
    try {
      await this.#d.writer.write({
        jti,
        tenantId: req.tenantId,
        projectId: req.projectId,
        apiKeyId: req.apiKeyId,
        kid: key.kid,
        mode: req.mode,
        scopes: req.scope,
        issuedAt: new Date(iat * 1000),
        expiresAt,
      });
    } catch (err) {
      if (err instanceof ApiKeyRevokedError) {
        // Revoked with its credentials (a gateway still trusted it from its cache): as a revoked key.
        await this.#release(req.tenantId, jti, 'API key revoked');
        throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      }
      if (err instanceof SigningKeyRevokedError) {
        // Signed with a key revoked meanwhile: the caller signs again with its replacement.
        await this.#release(req.tenantId, jti, 'signing key revoked');
        throw err;
      }
      await this.#release(req.tenantId, jti, 'recording failed');
      throw new AppError('unavailable', RECORD_UNAVAILABLE_MESSAGE, { retryAfterSeconds: 1, cause: err });
    }
    let confirmed: boolean;
    try {
      ({ granted: confirmed } = await this.#d.slots.confirm(req.tenantId, jti, ttlMs, req.cap));
    } catch (err) {
      await this.#withdraw(req.tenantId, jti, 'confirmation failed');
      throw slotsUnavailable(err);
    }
    if (!confirmed) {
      // Granted by slot state Redis lost before this row committed, and no longer fits.
      await this.#withdraw(req.tenantId, jti, 'over the cap after a slot rebuild');
      throw capReached(req.cap);
    }
    if (signal?.aborted) {
      // Nobody will receive it: do not let it hold a slot until it expires.
      await this.abandon(req.tenantId, jti);
      throw new AppError('unavailable', 'the call was cancelled', { retryAfterSeconds: 1 });
    }
    const { relays, fallback } = this.#d.relays.assign(req.region);
    return { token, jti, claims, expiresAt, relays, fallback };
  }

  /** Frees the slot of a credential that was issued but could not be delivered. */
  async abandon(tenantId: string, jti: string): Promise<void> {
    await this.#release(tenantId, jti, 'credential not delivered');
  }

  async #release(tenantId: string, jti: string, why: string): Promise<void> {
    try {
      await this.#d.slots.release(tenantId, jti);
    } catch (err) {
      // The lease still expires with the credential's ttl: bounded, never permanent.
      this.#d.logger.warn(
        { err: { message: (err as Error).message }, tenantId, why },
        'could not release a connection slot; it frees itself at expiry',
      );
    }
  }

  #releaseQuietly(tenantId: string, jti: string, why: string): void {
    void this.#release(tenantId, jti, why);
  }

  /** A recorded credential that will not be answered: revoked in the record, its slot freed. */
  async #withdraw(tenantId: string, jti: string, why: string): Promise<void> {
    try {
      await this.#d.store.withdraw(jti, this.#d.clock.now());
    } catch (err) {
      // Still never answered; a rebuild of the tenant's slots counts it until it expires.
      this.#d.logger.warn(
        { err: { message: (err as Error).message }, tenantId, why },
        'could not withdraw a recorded credential; it holds a slot after a rebuild until it expires',
      );
    }
    await this.#release(tenantId, jti, why);
  }

  // -------------------------------------------------------------- revocation

  /**
   * Revokes a credential of `tenantId`. Idempotent (same `revoked_at`). Postgres first (row
   * + feed entry in one transaction), then Redis (revocation marker, slot release) and the
   * bus; a Redis failure leaves the credential revoked, and a retry repeats the Redis steps.
   */
  async revoke(tenantId: string, jti: string): Promise<RevokedCredential> {
    if (!isId('tenant', tenantId))
      throw new AppError('invalid_request', 'tenant_id must be a tenant id (ten_…)');
    if (!isJti(jti)) throw new AppError('not_found', CREDENTIAL_NOT_FOUND_MESSAGE);
    const result = await this.#d.store.revoke(tenantId, jti, this.#d.clock.now(), (trx) =>
      this.#d.audit.enqueue(trx, {
        action: 'credential.revoke',
        tenantId,
        target: { type: 'credential', id: jti },
      }),
    );
    if (!result) throw new AppError('not_found', CREDENTIAL_NOT_FOUND_MESSAGE);
    if (result.newly) this.#d.audit.kick();
    await this.#afterRevocation(
      tenantId,
      [{ jti, expiresAt: result.expiresAt }],
      result.newly ? { count: 1, sequence: result.sequence, message: { jti } } : undefined,
    );
    return { jti, revokedAt: result.revokedAt };
  }

  /**
   * RevokeCredentials: every unexpired, unrevoked credential of the project matching the API
   * key and/or `issuedBefore`, in one PostgreSQL transaction with its feed entries, the revoked
   * key's record (only with `apiKeyRevoked`), the raised watermark and the
   * `credentials.bulk_revoke` audit event; then the follow-ups of a single revocation for each.
   * Answers how many this call revoked. `issuedBefore` is rounded up to a whole second (`iat`
   * is in seconds) and may not be later than now. A lock wait past the store's lock timeout
   * answers `unavailable` (nothing changed).
   */
  async revokeMany(input: BulkRevokeInput): Promise<number> {
    const { tenantId, projectId, apiKeyId } = input;
    const apiKeyRevoked = input.apiKeyRevoked === true;
    if (!isId('tenant', tenantId))
      throw new AppError('invalid_request', 'tenant_id must be a tenant id (ten_…)');
    if (!isId('project', projectId))
      throw new AppError('invalid_request', 'project_id must be a project id (prj_…)');
    if (apiKeyId && !isId('apiKey', apiKeyId))
      throw new AppError('invalid_request', 'api_key_id must be an API key id (key_…)');
    if (!apiKeyId && !input.issuedBefore)
      throw new AppError('invalid_request', 'give api_key_id, issued_before or both');
    if (apiKeyRevoked && !apiKeyId)
      throw new AppError('invalid_request', 'api_key_revoked needs the api_key_id of the revoked key');
    const now = this.#d.clock.now();
    let issuedBefore: Date | undefined;
    if (input.issuedBefore) {
      const ms = input.issuedBefore.getTime();
      if (!Number.isFinite(ms)) throw new AppError('invalid_request', 'issued_before must be an instant');
      if (ms > now.getTime())
        throw new AppError('invalid_request', 'issued_before must not be in the future');
      issuedBefore = new Date(Math.ceil(ms / 1000) * 1000);
    }
    const result = await this.#d.store
      .revokeMatching(
        { tenantId, projectId, apiKeyId: apiKeyId || undefined, apiKeyRevoked, issuedBefore },
        now,
        (trx, revoked) =>
          this.#d.audit.enqueue(trx, {
            action: 'credentials.bulk_revoke',
            tenantId,
            target: { type: 'project', id: projectId },
            details: {
              api_key_id: apiKeyId || null,
              issued_before: issuedBefore?.toISOString() ?? null,
              revoked,
            },
          }),
      )
      .catch((err: unknown) => {
        if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
          throw new AppError('unavailable', BULK_REVOKE_BUSY_MESSAGE, { retryAfterSeconds: 1, cause: err });
        }
        throw err;
      });
    this.#d.audit.kick();
    const last = [result.watermarkSequence, result.revoked.at(-1)?.sequence]
      .filter((s) => s !== undefined)
      .reduce<bigint | undefined>((a, b) => (a === undefined || b > a ? b : a), undefined);
    await this.#afterRevocation(
      tenantId,
      result.revoked,
      last === undefined
        ? undefined
        : { count: result.revoked.length, sequence: last, message: { projectId } },
    );
    return result.revoked.length;
  }

  /**
   * After revocations committed: Redis marks and slot releases (FOLLOW_UP_CHUNK at a time),
   * then, when something new was committed, the metrics, the local long-polls and one bus
   * message for every replica. Redis failures are logged: Postgres stays the truth, and a
   * retry of the call repeats these steps.
   */
  async #afterRevocation(
    tenantId: string,
    revoked: readonly { jti: string; expiresAt: Date }[],
    announce: { count: number; sequence: bigint | undefined; message: Record<string, string> } | undefined,
  ): Promise<void> {
    let failure: unknown;
    for (let i = 0; i < revoked.length; i += FOLLOW_UP_CHUNK) {
      const chunk = revoked.slice(i, i + FOLLOW_UP_CHUNK);
      const redis = await Promise.allSettled(
        chunk.flatMap(({ jti, expiresAt }) => [
          this.#d.marks?.mark(jti, expiresAt.getTime()),
          this.#d.slots.release(tenantId, jti),
        ]),
      );
      failure ??= redis.find((r) => r.status === 'rejected')?.reason;
    }
    if (failure !== undefined) {
      this.#d.logger.warn(
        { err: { message: (failure as Error).message }, tenantId, count: revoked.length },
        'revocation recorded, but Redis could not be updated; Postgres answers until a retry succeeds',
      );
    }
    if (!announce) return;
    this.#d.metrics?.revoked.inc(announce.count);
    this.#wake();
    await this.#d.bus
      .publish(
        BUS_CHANNELS.credentialsRevoked,
        JSON.stringify({ ...announce.message, sequence: String(announce.sequence) }),
      )
      .catch((err: unknown) => {
        this.#d.logger.warn(
          { err: { message: (err as Error).message } },
          'could not announce a revocation; long-polls of other replicas notice it within a second',
        );
      });
  }

  /**
   * RevokeSigningKey's record (docs/credentials.md, "Revoking a signing key"): in one
   * transaction (`SigningKeyRevocationStore.revoke`) the key leaves the key set with its private
   * half wiped, the oldest next key becomes active when the revoked key was the active one, the
   * revocation takes a feed sequence (listed in `revoked_keys` until every credential the key
   * signed has expired, plus a minute) and the `signing_key.revoke` event is written. Then every
   * replica and gateway is told (bus `signing-keys.changed` with `{"revoked_kid"}`: rings reload,
   * gateways drop the key from their JWKS) and held long-polls wake. A revoked key answers its
   * first revocation again (`newly: false`), recording and announcing nothing. Unknown kid:
   * `not_found`; the credentials table not lockable within 2 s: `unavailable`.
   */
  async revokeSigningKey(kid: string, requestedBy: string): Promise<KeyRevocation> {
    if (!KID.test(kid)) throw new AppError('not_found', SIGNING_KEY_NOT_FOUND_MESSAGE);
    const now = this.#d.clock.now();
    const feedUntil = new Date(now.getTime() + this.#d.maxTtlSeconds * 1000 + WATERMARK_SLACK_MS);
    const result = await this.#d.store.signingKeys
      .revoke({ kid, now, feedUntil, revokedBy: requestedBy }, (trx, revocation) =>
        this.#d.audit.enqueue(trx, {
          action: 'signing_key.revoke',
          tenantId: null,
          target: { type: 'signing_key', id: kid },
          occurredAt: now,
          details: {
            state: revocation.previousState,
            promoted_kid: revocation.promoted,
            requested_by: requestedBy,
          },
        }),
      )
      .catch((err: unknown) => {
        if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
          throw new AppError('unavailable', KEY_REVOKE_BUSY_MESSAGE, { retryAfterSeconds: 1, cause: err });
        }
        throw err;
      });
    if (!result) throw new AppError('not_found', SIGNING_KEY_NOT_FOUND_MESSAGE);
    if (!result.newly) return result;
    this.#d.audit.kick();
    this.#d.logger.warn(
      { kid, previousState: result.previousState, promoted: result.promoted, requestedBy },
      'signing key revoked: removed from the JWKS, its credentials refused',
    );
    const announcements = await Promise.allSettled([
      this.#d.bus.publish(BUS_CHANNELS.signingKeysChanged, JSON.stringify({ revoked_kid: kid })),
      this.#d.bus.publish(
        BUS_CHANNELS.credentialsRevoked,
        JSON.stringify({ kid, sequence: String(result.sequence) }),
      ),
    ]);
    const failed = announcements.find((a) => a.status === 'rejected');
    if (failed) {
      this.#d.logger.warn(
        { err: { message: ((failed as PromiseRejectedResult).reason as Error).message }, kid },
        'could not announce a signing key revocation; replicas and gateways notice it on their next refresh',
      );
    }
    this.#wake();
    return result;
  }

  /**
   * ListCredentials: a project's credentials, newest first, `limit` (1..200, 0: 50) per page;
   * `cursor` is the opaque `nextCursor` of the previous page.
   */
  async list(input: {
    tenantId: string;
    projectId: string;
    apiKeyId: string;
    active: boolean;
    limit: number;
    cursor: string;
  }): Promise<CredentialPage> {
    if (!isId('tenant', input.tenantId))
      throw new AppError('invalid_request', 'tenant_id must be a tenant id (ten_…)');
    if (!isId('project', input.projectId))
      throw new AppError('invalid_request', 'project_id must be a project id (prj_…)');
    // Checked before PostgreSQL sees it: a NUL byte there is an error of its own (22021).
    if (input.apiKeyId && !isId('apiKey', input.apiKeyId))
      throw new AppError('invalid_request', 'api_key_id must be an API key id (key_…)');
    if (!Number.isInteger(input.limit) || input.limit < 0 || input.limit > MAX_CREDENTIALS_LIMIT) {
      throw new AppError('invalid_request', `limit must be between 1 and ${MAX_CREDENTIALS_LIMIT}`);
    }
    const limit = input.limit || DEFAULT_CREDENTIALS_LIMIT;
    const after = input.cursor ? decodeListCursor(input.cursor) : undefined;
    const credentials = await this.#d.store.list(
      {
        tenantId: input.tenantId,
        projectId: input.projectId,
        apiKeyId: input.apiKeyId || undefined,
        active: input.active,
        limit: limit + 1,
        after,
      },
      this.#d.clock.now(),
    );
    const more = credentials.length > limit;
    const page = more ? credentials.slice(0, limit) : credentials;
    const last = page.at(-1);
    return { credentials: page, nextCursor: more && last ? encodeListCursor(last) : '' };
  }

  // ------------------------------------------------------------ verification

  /** The claims of a valid, unexpired, unrevoked credential; undefined otherwise. */
  async verify(token: string): Promise<CredentialClaims | undefined> {
    let kid = '';
    const claims = verifyCredential(token, {
      issuer: this.#d.config.issuer,
      audience: this.#d.config.audience,
      now: this.#d.clock.now().getTime() / 1000,
      keyFor: (k) => {
        kid = k;
        return this.#d.keys.verificationKey(k);
      },
    });
    if (!claims) return undefined;
    return (await this.#isRevoked(claims, kid)) ? undefined : claims;
  }

  /**
   * Revoked (Redis mark, else Postgres), issued before its project's watermark, or signed by a
   * revoked signing key (Postgres: a replica whose ring still holds the key refuses it too).
   */
  async #isRevoked(claims: CredentialClaims, kid: string): Promise<boolean> {
    if (this.#d.marks) {
      try {
        if (await this.#d.marks.isMarked(claims.jti)) return true;
      } catch {
        // Redis is away: Postgres decides.
      }
    }
    return this.#d.store.isRevoked(claims.jti, { projectId: claims.pid, iat: claims.iat, kid });
  }

  /** Fresh relays for the holder of a valid credential (region: asked, else the credential's). */
  async assign(token: string, region: string): Promise<{ relays: RelayView[]; fallback: string[] }> {
    const claims = await this.verify(token);
    if (!claims) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    return this.#d.relays.assign(requestedRegion(region) ?? claims.rgn);
  }

  // -------------------------------------------------------- revocation feed

  /**
   * Revocations after `cursor`, oldest first. With `waitMs` > 0 and nothing new, waits for
   * the first new one (bus message, or a re-read every second) until `waitMs` has passed.
   */
  async listRevocations(
    cursor: bigint,
    limit: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<RevocationPage> {
    if (cursor < 0n) throw new AppError('invalid_request', 'cursor must not be negative');
    if (!Number.isInteger(limit) || limit < 0 || limit > MAX_REVOCATIONS_LIMIT) {
      throw new AppError(
        'invalid_request',
        `limit must be between 0 (the default, ${DEFAULT_REVOCATIONS_LIMIT}) and ${MAX_REVOCATIONS_LIMIT}`,
      );
    }
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > MAX_REVOCATIONS_WAIT_MS) {
      throw new AppError('invalid_request', `wait_ms must be between 0 and ${MAX_REVOCATIONS_WAIT_MS}`);
    }
    const pageSize = limit || DEFAULT_REVOCATIONS_LIMIT;
    const deadline = performance.now() + waitMs;
    const openedAtMs = this.#d.clock.now().getTime();
    for (;;) {
      // Armed before the read: a revocation committed meanwhile still wakes us.
      const woken = this.#nextWake();
      // Watermarks and revoked keys first: every revocation before the newest one's sequence
      // has committed by then (one lock orders them all), so the read after it cannot miss one.
      const since = new Date(
        this.#d.clock.now().getTime() - this.#d.maxTtlSeconds * 1000 - WATERMARK_SLACK_MS,
      );
      const watermarks = await this.#d.store.watermarksSince(since);
      const revokedKeys = await this.#d.store.signingKeys.inFeed(this.#d.clock.now());
      const revocations = await this.#d.store.revocationsAfter(cursor, pageSize);
      const raised = [...watermarks, ...revokedKeys].reduce(
        (max, w) => (w.sequence > max ? w.sequence : max),
        cursor,
      );
      const remaining = deadline - performance.now();
      if (revocations.length || raised > cursor || remaining <= 0 || signal?.aborted || this.#stopped) {
        woken.cancel();
        const last = revocations.at(-1)?.sequence ?? cursor;
        // A full page may have more revocations before the watermark's position: stop at the page.
        const nextCursor = revocations.length === pageSize || raised < last ? last : raised;
        if (waitMs > 0 && revocations.length) {
          this.#d.metrics?.feedDelivered(
            revocations.map((r) => r.revokedAt),
            openedAtMs,
            this.#d.clock.now().getTime(),
          );
        }
        return { revocations, nextCursor, watermarks, revokedKeys };
      }
      await woken.wait(Math.min(remaining, FEED_RECHECK_MS), signal);
    }
  }

  #wake(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) w();
  }

  #nextWake(): { wait(ms: number, signal?: AbortSignal): Promise<void>; cancel(): void } {
    let fire: () => void = () => {};
    const woken = new Promise<void>((resolve) => {
      fire = resolve;
    });
    this.#waiters.add(fire);
    const cancel = () => this.#waiters.delete(fire);
    return {
      cancel,
      async wait(ms, signal) {
        let timer: NodeJS.Timeout | undefined;
        let onAbort: (() => void) | undefined;
        try {
          await Promise.race([
            woken,
            new Promise<void>((resolve) => {
              timer = setTimeout(resolve, ms);
              onAbort = resolve;
              signal?.addEventListener('abort', onAbort, { once: true });
            }),
          ]);
        } finally {
          clearTimeout(timer);
          if (onAbort) signal?.removeEventListener('abort', onAbort);
          cancel();
        }
      },
    };
  }
}

/** The opaque ListCredentials cursor: base64url of the last row's issued_at (ms) and jti. */
function encodeListCursor(last: CredentialListing): string {
  return Buffer.from(JSON.stringify([last.issuedAt.getTime(), last.jti])).toString('base64url');
}

function decodeListCursor(cursor: string): { issuedAt: Date; jti: string } {
  try {
    const [ms, jti] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (typeof ms === 'number' && Number.isSafeInteger(ms) && typeof jti === 'string' && isJti(jti)) {
      const issuedAt = new Date(ms);
      // A safe integer can still be past the last instant a Date holds (±8.64e15 ms).
      if (Number.isFinite(issuedAt.getTime())) return { issuedAt, jti };
    }
  } catch {
    // fall through
  }
  throw new AppError('invalid_request', 'cursor is not one this API returned');
}

/** A signing key revoked under an issuance, and no replacement loaded in time. */
function revokedKeyUnavailable(cause: SigningKeyRevokedError): AppError {
  return new AppError('unavailable', 'the signing key was just replaced; retry shortly', {
    retryAfterSeconds: 1,
    cause,
  });
}

/** The refusal of a tenant at its cap, whether decided at reservation or at confirmation. */
function capReached(cap: number): AppError {
  return new AppError(
    'payment_required',
    `concurrent connection limit reached (${cap}); upgrade the plan for more`,
  );
}

/** The slot store could not decide: Redis is away, or PostgreSQL while a slot set is rebuilt. */
function slotsUnavailable(err: unknown): AppError {
  const message =
    err instanceof SlotLedgerUnavailableError ? RECORD_UNAVAILABLE_MESSAGE : SLOTS_UNAVAILABLE_MESSAGE;
  return new AppError('unavailable', message, { retryAfterSeconds: 1, cause: err });
}
