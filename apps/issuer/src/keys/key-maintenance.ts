import { type AuditRecorder, systemActor } from '@relayplane/shared/audit-outbox';
import type { Logger } from '@relayplane/shared/logger';
import {
  type MaintenancePlan,
  planMaintenance,
  type RotationPolicy,
  removeAfterFor,
} from '../domain/key-lifecycle.ts';
import type { SigningKeyStore } from '../stores/signing-keys.ts';
import { generateSigningKey, kekFingerprint, sealPrivateKey } from './key-material.ts';

/** The scheduler's job id of the maintenance tick, and the audit actor of what a tick does. */
export const KEY_MAINTENANCE_JOB = 'issuer-key-maintenance';

export interface MaintenanceResult {
  /** True when the tick wrote anything (the key set or the pending request changed). */
  changed: boolean;
  rotation: MaintenancePlan['rotation'];
  rotationPendingSince: Date | null;
  created: string[];
  removed: string[];
}

/** Applies `planMaintenance` to the stored keys: one transaction under the advisory lock. */
export class KeyMaintenance {
  readonly #store: SigningKeyStore;
  readonly #kek: Buffer;
  readonly #fingerprint: string;
  readonly #policy: RotationPolicy;
  readonly #logger: Logger;
  readonly #audit: AuditRecorder;

  constructor(deps: {
    store: SigningKeyStore;
    kek: Buffer;
    policy: RotationPolicy;
    logger: Logger;
    audit: AuditRecorder;
  }) {
    this.#store = deps.store;
    this.#audit = deps.audit;
    this.#kek = deps.kek;
    this.#fingerprint = kekFingerprint(deps.kek);
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
              kekFingerprint: this.#fingerprint,
              sealed: sealPrivateKey(key.privateKey, this.#kek, key.kid),
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
      return {
        changed: plan.actions.length > 0 || requested,
        rotation: plan.rotation,
        rotationPendingSince: plan.rotationPendingSince,
        created,
        removed,
      };
    });
    if (request || result.rotation) this.#audit.kick();
    return result;
  }
}
