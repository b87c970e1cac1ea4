/**
 * A person's second factor as login, device approval, password change and MFA removal ask for
 * it (grpc/deps.ts SecondFactor): a current TOTP code, each time step accepted once, or an
 * unused recovery code, used once. Every attempt counts against the user's own limit first
 * (like a password guess, so a stolen session or an `mfa_token` cannot brute-force six digits);
 * a wrong or replayed code is recorded (`user.mfa_failed`) and answered alike.
 */

import { AppError } from '@relayplane/contract/errors';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { RateLimiter } from '@relayplane/shared/rate-limit';
import type { AuditTrail } from '../audit/trail.ts';
import type { SecondFactor } from '../grpc/deps.ts';
import { enforceLimits } from '../grpc/limits.ts';
import { throttleKeys } from '../redis/keys.ts';
import type { SecondFactorStore } from '../stores/second-factors.ts';
import { hashRecoveryCode, normaliseRecoveryCode } from './recovery-codes.ts';
import type { SecretSealer } from './sealing.ts';
import { matchingStep } from './totp.ts';

export const WRONG_CODE_MESSAGE = 'the code is wrong or was already used';
export const MFA_RATE_LIMITED_MESSAGE = 'too many second-factor attempts; retry later';

export interface SecondFactorsDeps {
  store: SecondFactorStore;
  sealer: SecretSealer;
  clock: Clock;
  /** The login throttle (its window); the user's codes count under `mfa:user:<id>`. */
  throttle: RateLimiter;
  /** Code attempts per user and window. */
  maxAttempts: number;
  audit: AuditTrail;
  logger: Logger;
}

export class SecondFactors implements SecondFactor {
  readonly #deps: SecondFactorsDeps;
  constructor(deps: SecondFactorsDeps) {
    this.#deps = deps;
  }

  isEnrolled(userId: string): Promise<boolean> {
    return this.#deps.store.isEnrolled(userId);
  }

  async verify(
    user: { id: string; email: string },
    code: string,
    context: { tenantId: string | null; clientIp: string },
  ): Promise<'totp' | 'recovery_code'> {
    const d = this.#deps;
    await enforceLimits(
      d.throttle,
      [{ key: throttleKeys.mfaUser(user.id), max: d.maxAttempts }],
      MFA_RATE_LIMITED_MESSAGE,
    );
    const typed = code.trim();
    const now = d.clock.now();
    let used: 'totp' | 'recovery_code' | undefined;
    if (/^\d{6}$/.test(typed)) {
      const enrolment = await d.store.find(user.id);
      const secret =
        enrolment?.status === 'confirmed' ? d.sealer.open(enrolment.sealedSecret, user.id) : undefined;
      const step = secret ? matchingStep(secret, typed, now) : undefined;
      if (step !== undefined && enrolment && (await d.store.useStep(user.id, enrolment.sealedSecret, step))) {
        used = 'totp';
      }
    } else {
      const normalised = normaliseRecoveryCode(typed);
      if (normalised && (await d.store.useRecoveryCode(user.id, hashRecoveryCode(normalised), now))) {
        used = 'recovery_code';
      }
    }
    if (used) {
      if (used === 'recovery_code') d.logger.info({ userId: user.id }, 'recovery code used');
      return used;
    }
    await d.audit.recordAlone({
      action: 'user.mfa_failed',
      tenantId: context.tenantId,
      actor: { type: 'user', id: user.id },
      target: { type: 'user', id: user.id },
      outcome: 'failure',
      details: { reason: 'wrong_or_used_code' },
    });
    throw new AppError('unauthenticated', WRONG_CODE_MESSAGE);
  }
}
