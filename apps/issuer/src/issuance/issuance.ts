import type { CapNotices } from '../sessions/session-notices.ts';
/**
 * Issuance of relay credentials: slot → sign → record → answer.
 *
 * Invariants:
 * - A credential is answered only after its jti row committed (CredentialWriter).
 * - Every answered credential holds one slot of its tenant; a failed issuance releases the
 *   slot it reserved, and a refused or failed one never answers a token.
 * - The slot store failing means refusal (`unavailable`), never a credential and never 402.
 * - Postgres is the truth about slots: the credentials table is the ledger a lost slot set
 *   is rebuilt from. A slot reserved before the row committed is confirmed after it committed
 *   (a rebuild in between did not count it); a refused confirmation withdraws the recorded
 *   credential (revoked_at set, so no later rebuild counts it) and answers the cap's 402.
 */

import { pathClaims } from '@relayplane/contract/credential-paths';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { CredentialsConfig } from '../config.ts';
import { type CredentialClaims, newJti, signCredential } from '../keys/jwt.ts';
import type { ActiveSigningKey } from '../keys/key-ring.ts';
import type { IssuerMetrics } from '../metrics.ts';
import type { RelayView } from '../relays/relay-directory.ts';
import { type IssueInput, issueRequest } from './credential-request.ts';
import type { CredentialStore } from './credential-store.ts';
import { ApiKeyRevokedError, type CredentialWriter, SigningKeyRevokedError } from './credential-writer.ts';
import { type SlotLedger, SlotLedgerUnavailableError, type SlotStore } from './slot-store.ts';

export const SLOTS_UNAVAILABLE_MESSAGE = 'concurrency limits are unavailable; retry shortly';
const RECORD_UNAVAILABLE_MESSAGE = 'credentials cannot be recorded right now; retry shortly';
/**
 * How long an issuance whose signing key was revoked meanwhile waits for this replica's key
 * ring to load the key that replaced it (the revoking replica's bus message) before it answers
 * `unavailable`. The ring is reloaded on that message within milliseconds.
 */
const REPLACED_KEY_WAIT_MS = 2_000;
const REPLACED_KEY_POLL_MS = 5;

export interface IssuedCredential {
  token: string;
  jti: string;
  claims: CredentialClaims;
  expiresAt: Date;
  relays: RelayView[];
  fallback: string[];
}

export interface IssuanceDeps {
  /** cap.reached webhook notices (issue 34); absent: none. */
  capNotices?: Pick<CapNotices, 'reached'>;
  config: CredentialsConfig;
  /** Upper bound of ttl_seconds: the key policy's longest credential lifetime. */
  maxTtlSeconds: number;
  clock: Clock;
  logger: Logger;
  slots: SlotStore;
  writer: CredentialWriter;
  /** Withdraws recorded credentials that will not be answered. */
  store: CredentialStore;
  /** What a lost slot set is rebuilt from (default: `store`, every live credential). */
  ledger?: SlotLedger;
  /**
   * How long a credential holds its slot before it connects (ms; default: its TTL). A relay
   * session then takes the slot over (sessions/relay-sessions.ts).
   */
  connectWindowMs?: number;
  keys: { activeKey(): ActiveSigningKey | undefined };
  relays: { assign(region?: string): { relays: RelayView[]; fallback: string[] } };
  /** Signs the JWT (replaceable for fault-injection tests). */
  sign?: typeof signCredential;
  /** Issuance counters; absent: nothing is counted. */
  metrics?: IssuerMetrics;
}

export class Issuance {
  readonly #d: IssuanceDeps;
  readonly #sign: typeof signCredential;

  constructor(deps: IssuanceDeps) {
    this.#d = deps;
    this.#sign = deps.sign ?? signCredential;
    // The rows this class records before answering are what a lost slot set is rebuilt from.
    deps.slots.recoverFrom(deps.ledger ?? deps.store);
  }

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
    const ttlMs = Math.min(req.ttlSeconds * 1000, this.#d.connectWindowMs ?? Number.POSITIVE_INFINITY);

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
    if (!granted) {
      void this.#d.capNotices?.reached(req.tenantId, req.cap, 'issuance');
      throw req.capReached();
    }

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
    Object.assign(claims, pathClaims(req.projectId, req.paths));

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
      throw req.capReached();
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
}

/** A signing key revoked under an issuance, and no replacement loaded in time. */
function revokedKeyUnavailable(cause: SigningKeyRevokedError): AppError {
  return new AppError('unavailable', 'the signing key was just replaced; retry shortly', {
    retryAfterSeconds: 1,
    cause,
  });
}

/** The slot store could not decide: Redis is away, or PostgreSQL while a slot set is rebuilt. */
function slotsUnavailable(err: unknown): AppError {
  const message =
    err instanceof SlotLedgerUnavailableError ? RECORD_UNAVAILABLE_MESSAGE : SLOTS_UNAVAILABLE_MESSAGE;
  return new AppError('unavailable', message, { retryAfterSeconds: 1, cause: err });
}
