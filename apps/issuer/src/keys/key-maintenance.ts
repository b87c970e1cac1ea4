import { type AuditRecorder, systemActor } from '@relayplane/shared/audit-outbox';
import type { Logger } from '@relayplane/shared/logger';
import type { Scheduler } from '@relayplane/shared/scheduler';
import {
  type MaintenancePlan,
  planMaintenance,
  type RotationPolicy,
  removeAfterFor,
} from './key-lifecycle.ts';
import { generateSigningKey, type KekSet } from './key-material.ts';
import type { SigningKeyStore, StoredKey } from './signing-key-store.ts';

/** The scheduler's job id of the maintenance tick, and the audit actor of what a tick does. */
export const KEY_MAINTENANCE_JOB = 'issuer-key-maintenance';

export interface MaintenanceResult {
  /** True when the tick wrote anything (the key set or the pending request changed). */
  changed: boolean;
  rotation: MaintenancePlan['rotation'];
  rotationPendingSince: Date | null;
  created: string[];
  removed: string[];
  /** Kids of the keys this tick re-encrypted from a previous KEK under the current one. */
  resealed: string[];
}

/** Applies `planMaintenance` to the stored keys: one transaction under the advisory lock. */
export class KeyMaintenance {
  readonly #store: SigningKeyStore;
  readonly #keks: KekSet;
  readonly #policy: RotationPolicy;
  readonly #logger: Logger;
  readonly #audit: AuditRecorder;
  /** Fingerprints of unknown KEKs already warned about (once per process each). */
  readonly #warnedUnknown = new Set<string>();

  constructor(deps: {
    store: SigningKeyStore;
    keks: KekSet;
    policy: RotationPolicy;
    logger: Logger;
    audit: AuditRecorder;
  }) {
    this.#store = deps.store;
    this.#audit = deps.audit;
    this.#keks = deps.keks;
    this.#policy = deps.policy;
    this.#logger = deps.logger;
  }

  get policy(): RotationPolicy {
    return this.#policy;
  }

  /**
   * One tick at `now`; `request` first records an on-demand rotation in the same transaction.
   * A `signing_key.rotate` event commits with it (audit or refuse): for every on-demand request
   * (the caller's actor; `rotated` false while the next key is not yet eligible), and for every
   * rotation a tick makes on its own (actor system `issuer-key-maintenance`). Kids only,
   * never key material.
   *
   * Last, every live key still sealed by a previous KEK (`RELAYPLANE_KEK_PREVIOUS`) is
   * re-encrypted under the current one (`#reseal`).
   */
  async run(now: Date, request?: { requestedBy: string }): Promise<MaintenanceResult> {
    const result = await this.#store.locked(async (tx, trx) => {
      let requested = false;
      if (request) {
        requested = (await tx.rotationRequest()) === undefined;
        await tx.requestRotation(now, request.requestedBy);
      }
      const keys = await tx.listLive();
      const pending = await tx.rotationRequest();
      const plan = planMaintenance({
        keys,
        now,
        rotationRequestedAt: pending?.requestedAt ?? null,
        policy: this.#policy,
      });
      const created: string[] = [];
      const removed: string[] = [];
      for (const action of plan.actions) {
        switch (action.type) {
          case 'create-active':
          case 'create-next': {
            const key = await generateSigningKey();
            await tx.insert({
              kid: key.kid,
              x: key.x,
              ...this.#keks.seal(key.privateKey, key.kid),
              createdAt: now,
              activatedAt: action.type === 'create-active' ? now : null,
            });
            created.push(key.kid);
            this.#logger.info(
              { kid: key.kid, state: action.type === 'create-active' ? 'active' : 'next' },
              'signing key created',
            );
            break;
          }
          case 'activate':
            await tx.activate(action.kid, now);
            break;
          case 'deactivate':
            await tx.deactivate(action.kid, now, action.removeAfter);
            break;
          case 'remove':
            await tx.remove(action.kid, now);
            removed.push(action.kid);
            this.#logger.info({ kid: action.kid }, 'signing key removed from the JWKS, private half wiped');
            break;
          case 'clear-rotation-request':
            await tx.clearRotationRequest();
            break;
          default: {
            const unknown: never = action;
            throw new Error(`unknown maintenance action ${JSON.stringify(unknown)}`);
          }
        }
      }
      if (plan.rotation) {
        this.#logger.info(
          {
            reason: plan.rotation.reason,
            from: plan.rotation.from,
            to: plan.rotation.to,
            previousRemoveAfter: removeAfterFor(now, this.#policy).toISOString(),
            requestedBy: pending?.requestedBy,
          },
          'signing keys rotated',
        );
      } else if (requested) {
        this.#logger.info(
          { requestedBy: request?.requestedBy },
          'signing key rotation requested; waiting for the next key to become eligible',
        );
      }
      if (request || plan.rotation) {
        await this.#audit.enqueue(trx, {
          action: 'signing_key.rotate',
          tenantId: null,
          // The key that signs after this tick: the new one, or the one still active.
          target: {
            type: 'signing_key',
            id: plan.rotation?.to ?? keys.find((k) => k.activatedAt && !k.deactivatedAt)?.kid ?? '',
          },
          occurredAt: now,
          ...(request ? {} : { actor: systemActor(KEY_MAINTENANCE_JOB) }),
          details: {
            trigger: request ? 'manual' : plan.rotation?.reason,
            rotated: plan.rotation !== null,
            from_kid: plan.rotation?.from ?? null,
            to_kid: plan.rotation?.to ?? null,
            ...(request ? { requested_by: request.requestedBy } : {}),
            ...(plan.rotationPendingSince ? { pending_since: plan.rotationPendingSince.toISOString() } : {}),
          },
        });
      }
      const resealed = await this.#reseal(
        tx,
        keys.filter((k) => !removed.includes(k.kid)),
      );
      return {
        changed: plan.actions.length > 0 || requested || resealed.length > 0,
        rotation: plan.rotation,
        rotationPendingSince: plan.rotationPendingSince,
        created,
        removed,
        resealed,
      };
    });
    if (request || result.rotation) this.#audit.kick();
    return result;
  }

  /**
   * Re-encrypts under the current KEK each of `keys` sealed by a previous one. Runs inside the
   * tick's transaction, under the maintenance advisory lock, and each write is a
   * compare-and-set on the old fingerprint (`SigningKeyStore.reseal`): with several replicas
   * ticking, each key is re-encrypted exactly once. A key sealed by a KEK this replica does not
   * have (a replica not yet given the new KEK can still be writing keys under the old one) is
   * left for a replica that has it; one that cannot be opened is logged and left as it is, so
   * the rest of maintenance goes on.
   */
  async #reseal(tx: SigningKeyStore, keys: readonly StoredKey[]): Promise<string[]> {
    const resealed: string[] = [];
    for (const key of keys) {
      const from = key.kekFingerprint;
      if (!key.sealed || from === this.#keks.currentFingerprint) continue;
      if (!this.#keks.byFingerprint(from)) {
        if (!this.#warnedUnknown.has(from)) {
          this.#warnedUnknown.add(from);
          this.#logger.warn(
            { kid: key.kid, kekFingerprint: from, current: this.#keks.currentFingerprint },
            'signing key sealed by a key-encryption key this replica does not have (neither RELAYPLANE_KEK nor RELAYPLANE_KEK_PREVIOUS); left for a replica that has it',
          );
        }
        continue;
      }
      let next: ReturnType<KekSet['seal']>;
      try {
        next = this.#keks.seal(this.#keks.open(key.sealed, from, key.kid, key.x), key.kid);
      } catch (err) {
        this.#logger.error(
          { kid: key.kid, kekFingerprint: from, err: { message: (err as Error).message } },
          'could not re-encrypt a signing key under the current key-encryption key',
        );
        continue;
      }
      if (await tx.reseal(key.kid, from, next)) {
        resealed.push(key.kid);
        this.#logger.info(
          { kid: key.kid, from, to: next.kekFingerprint },
          'signing key re-encrypted under the current key-encryption key',
        );
      }
    }
    return resealed;
  }
}

/**
 * Registers the maintenance tick (scheduled rotation, next-key creation, removal) every
 * `intervalMs`; with bullmq one replica runs each occurrence, and every replica learns the
 * result from the bus.
 */
export function scheduleKeyMaintenance(
  scheduler: Scheduler,
  keys: { tick(): Promise<unknown> },
  intervalMs: number,
): void {
  scheduler.every(KEY_MAINTENANCE_JOB, intervalMs, async () => {
    await keys.tick();
  });
}
