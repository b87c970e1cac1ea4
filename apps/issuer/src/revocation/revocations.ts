/**
 * Revoking credentials: one by jti, or a project's by API key and/or issue time; and whether a
 * presented credential is revoked.
 *
 * Invariants:
 * - Postgres is the truth about revocation (row and feed entry in one transaction, with the
 *   audit event); Redis only mirrors it (marks), and a Redis failure leaves the revocation in
 *   force: a retry repeats the Redis steps.
 * - A revoked credential's slot is released, so it no longer counts against its tenant's cap.
 */

import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { isJti } from '../keys/jwt.ts';
import type { IssuerMetrics } from '../metrics.ts';
import type { RedisRevocationMarks } from './revocation-marks.ts';
import { BULK_REVOKE_LOCK_TIMEOUT_MS, LOCK_NOT_AVAILABLE, type RevocationStore } from './revocation-store.ts';

const CREDENTIAL_NOT_FOUND_MESSAGE = 'credential not found';
const BULK_REVOKE_BUSY_MESSAGE = `the credentials could not be locked for revocation within ${BULK_REVOKE_LOCK_TIMEOUT_MS / 1000} s; nothing was changed, retry shortly`;
/** Redis follow-ups of a bulk revocation run this many at once (marks, then slot releases). */
const FOLLOW_UP_CHUNK = 256;

export interface RevokedCredential {
  jti: string;
  revokedAt: Date;
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

export interface RevocationsDeps {
  clock: Clock;
  logger: Logger;
  bus: Bus;
  store: RevocationStore;
  /** Null in embedded mode (no Redis): revocation checks go to Postgres. */
  marks: RedisRevocationMarks | null;
  /** The connection slots a revoked credential frees (issuance's slot store). */
  slots: { release(tenantId: string, jti: string): Promise<void> };
  /** Long-polls of this replica wake on a new revocation. */
  feed: { wake(): void };
  /** The audit outbox: a revocation commits only together with its event. */
  audit: AuditRecorder;
  /** Revocation counters; absent: nothing is counted. */
  metrics?: IssuerMetrics;
}

export class Revocations {
  readonly #d: RevocationsDeps;

  constructor(deps: RevocationsDeps) {
    this.#d = deps;
  }

  /**
   * Revokes a credential of `tenantId`. Idempotent (same `revoked_at`). Postgres first (row
   * + feed entry in one transaction), then Redis (revocation marker, slot release) and the
   * bus; a Redis failure leaves the credential revoked, and a retry repeats the Redis steps.
   */
  async revoke(tenantId: string, jti: string): Promise<RevokedCredential> {
    if (!isId('tenant', tenantId))
      throw new AppError('invalid_request', 'tenant_id must be a tenant id (ten_…)');
    if (!isJti(jti)) throw new AppError('not_found', CREDENTIAL_NOT_FOUND_MESSAGE);
    const result = await this.#d.store.revoke(tenantId, jti, this.#d.clock.now(), (trx, credential) =>
      this.#d.audit.enqueue(trx, {
        action: 'credential.revoke',
        tenantId,
        target: { type: 'credential', id: jti },
        details: { project_id: credential.projectId },
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
    this.#d.feed.wake();
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
   * Revoked (Redis mark, else Postgres), issued before its project's watermark, or signed by a
   * revoked signing key (Postgres: a replica whose ring still holds the key refuses it too).
   */
  async isRevoked(jti: string, issued: { projectId: string; iat: number; kid: string }): Promise<boolean> {
    if (this.#d.marks) {
      try {
        if (await this.#d.marks.isMarked(jti)) return true;
      } catch {
        // Redis is away: Postgres decides.
      }
    }
    return this.#d.store.isRevoked(jti, issued);
  }
}
