/**
 * Revoking a compromised signing key (docs/credentials.md, "Revoking a signing key"): an
 * emergency, not a rotation. The record is the revocation feed's (the key leaves the key set,
 * the next key signs at once, the feed lists the kid, the event is audited, replicas and
 * gateways are told); then the key set is brought back to shape through the signing keys' own
 * maintenance.
 */

import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { keyState } from '../keys/key-lifecycle.ts';
import type { StoredKey } from '../keys/signing-key-store.ts';
import type { SigningKeys } from '../keys/signing-keys.ts';
import { WATERMARK_SLACK_MS } from './revocation-feed.ts';
import { LOCK_NOT_AVAILABLE } from './revocation-store.ts';
import type { KeyRevocation, SigningKeyRevocationStore } from './signing-key-revocation-store.ts';

const SIGNING_KEY_NOT_FOUND_MESSAGE = 'signing key not found';
const KID = /^[A-Za-z0-9_-]{1,128}$/;
const KEY_REVOKE_BUSY_MESSAGE =
  'the credentials could not be locked for the signing key revocation in time; nothing was changed, retry shortly';

export interface SigningKeyRevocationResult extends KeyRevocation {
  /** The revoked key as stored now (removed). */
  revoked: StoredKey;
  /** The key that signs now. */
  active: StoredKey | undefined;
}

export interface SigningKeyRevocationDeps {
  clock: Clock;
  logger: Logger;
  bus: Bus;
  store: SigningKeyRevocationStore;
  /** The longest credential lifetime: how long the revoked key stays in the feed. */
  maxTtlSeconds: number;
  keys: Pick<SigningKeys, 'reload' | 'tick' | 'list'>;
  /** Long-polls of this replica wake on the revocation. */
  feed: { wake(): void };
  /** The audit outbox: the revocation commits only together with its event. */
  audit: AuditRecorder;
}

export class SigningKeyRevocation {
  readonly #d: SigningKeyRevocationDeps;

  constructor(deps: SigningKeyRevocationDeps) {
    this.#d = deps;
  }

  /**
   * Revokes `kid` (see `#record`), then reloads this replica's key ring and runs one
   * maintenance tick at once: with no next key left to promote it creates a key that signs at
   * once, and it publishes a new next key. A key created here signs without having been
   * published first (revocation cannot wait 300 s): verifiers learn it from their refetch on the
   * feed's `revoked_keys`, or on its unknown kid.
   */
  async revoke(input: { kid: string; requestedBy: string }): Promise<SigningKeyRevocationResult> {
    const revocation = await this.#record(input.kid, input.requestedBy);
    if (revocation.newly) {
      await this.#d.keys.reload('tick');
      await this.#d.keys.tick();
    }
    const { keys } = await this.#d.keys.list();
    return {
      ...revocation,
      revoked: keys.find((k) => k.kid === input.kid) ?? revocation.key,
      active: keys.find((k) => keyState(k) === 'active'),
    };
  }

  /**
   * The record of a signing key revocation: in one transaction
   * (`SigningKeyRevocationStore.revoke`) the key leaves the key set with its private
   * half wiped, the oldest next key becomes active when the revoked key was the active one, the
   * revocation takes a feed sequence (listed in `revoked_keys` until every credential the key
   * signed has expired, plus a minute) and the `signing_key.revoke` event is written. Then every
   * replica and gateway is told (bus `signing-keys.changed` with `{"revoked_kid"}`: rings reload,
   * gateways drop the key from their JWKS) and held long-polls wake. A revoked key answers its
   * first revocation again (`newly: false`), recording and announcing nothing. Unknown kid:
   * `not_found`; the credentials table not lockable within 2 s: `unavailable`.
   */
  async #record(kid: string, requestedBy: string): Promise<KeyRevocation> {
    if (!KID.test(kid)) throw new AppError('not_found', SIGNING_KEY_NOT_FOUND_MESSAGE);
    const now = this.#d.clock.now();
    const feedUntil = new Date(now.getTime() + this.#d.maxTtlSeconds * 1000 + WATERMARK_SLACK_MS);
    const result = await this.#d.store
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
    this.#d.feed.wake();
    return result;
  }
}
