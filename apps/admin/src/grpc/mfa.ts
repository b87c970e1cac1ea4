/**
 * A second factor for people (issue 31; docs/iam.md, "Second factor"): TOTP enrolment (start →
 * confirm with a first code → ten recovery codes), new recovery codes, its status, and its removal; the tenant's
 * `require_mfa` (its owner changes it). Every RPC acts on the caller's own user session (a login
 * or a CLI token); a bot or identity token is refused.
 */
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { ROLES } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import { newRecoveryCodeSet } from '../mfa/recovery-codes.ts';
import { base32, matchingStep, newTotpSecret, otpauthUri } from '../mfa/totp.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { LiveSession } from '../stores/sessions.ts';
import type { AdminDeps } from './deps.ts';
import { admitGuess, attemptIp, clientLimit, countFailure, guessClient } from './login.ts';
import { requireSecondFactorIfRequired } from './principal.ts';
import { requireOwnSession } from './sessions.ts';

type Impl = ServiceImpl<typeof AdminService>;

export const ALREADY_ENROLLED_MESSAGE =
  'a second factor is already enrolled: remove it (DELETE /admin/v1/auth/mfa/totp) before enrolling another';
export const NOTHING_TO_CONFIRM_MESSAGE =
  'no enrolment to confirm: start one with POST /admin/v1/auth/mfa/totp';
export const WRONG_FIRST_CODE_MESSAGE = 'the code does not match the new secret: check the app and the clock';
export const NOT_ENROLLED_MESSAGE = 'no second factor is enrolled';
export const DISABLE_NEEDS_PROOF_MESSAGE =
  'send a current code (or a recovery code) as code, or the password';
export const RENEW_NEEDS_CODE_MESSAGE = 'send a current code (or an unused recovery code) as code';
export const OWNER_ONLY_MESSAGE = "only the tenant's owner may change its settings";
/**
 * The caller's own user session (a login or the CLI's token); bots and identity tokens: 403.
 * `'act'`: also refused (403) while the tenant requires a second factor the user lacks, as
 * requireActor does; `'enrol'`: what such a member may still do (docs/iam.md, the gateway's
 * MFA_ENROLMENT_ROUTES).
 */
async function ownLogin(
  deps: AdminDeps,
  principal: Parameters<typeof requireOwnSession>[1],
  may: 'enrol' | 'act',
): Promise<SessionRecord> {
  const session = await requireOwnSession(deps, principal);
  // requireOwnSession answers requireUserSession's LiveSession, typed by its SessionRecord part.
  if (may === 'act') requireSecondFactorIfRequired(session as LiveSession);
  return session;
}

export function startTotpEnrollment(deps: AdminDeps): Impl['startTotpEnrollment'] {
  return async (req) => {
    const session = await ownLogin(deps, req.principal, 'enrol');
    const secret = newTotpSecret();
    const sealed = deps.sealer.seal(secret, session.user.id);
    const outcome = await deps.audit.change(async (trx) => {
      const started = await deps.secondFactors.start(session.user.id, sealed, deps.clock.now(), trx);
      if (started === 'started') {
        await deps.audit.record(trx, {
          action: 'user.mfa_enroll',
          tenantId: session.tenant.id,
          actor: sessionActor(session),
          target: { type: 'user', id: session.user.id },
          details: { factor: 'totp', step: 'started' },
        });
      }
      return started;
    });
    if (outcome === 'enrolled') throw new AppError('conflict', ALREADY_ENROLLED_MESSAGE);
    deps.logger.info({ userId: session.user.id }, 'second factor enrolment started');
    return { secret: base32(secret), otpauthUri: otpauthUri(secret, session.user.email) };
  };
}

export function confirmTotpEnrollment(deps: AdminDeps): Impl['confirmTotpEnrollment'] {
  return async (req) => {
    const session = await ownLogin(deps, req.principal, 'enrol');
    const code = req.code.trim();
    if (!/^\d{6}$/.test(code))
      throw new AppError('invalid_request', 'code must be the 6 digits the app shows');
    const enrolment = await deps.secondFactors.find(session.user.id);
    if (enrolment?.status !== 'pending') {
      throw new AppError('conflict', enrolment ? ALREADY_ENROLLED_MESSAGE : NOTHING_TO_CONFIRM_MESSAGE);
    }
    const secret = deps.sealer.open(enrolment.sealedSecret, session.user.id);
    const now = deps.clock.now();
    const step = secret ? matchingStep(secret, code, now) : undefined;
    if (step === undefined) throw new AppError('invalid_request', WRONG_FIRST_CODE_MESSAGE);
    const { codes, hashes } = newRecoveryCodeSet();
    const confirmed = await deps.audit.change(async (trx) => {
      const done = await deps.secondFactors.confirm(
        session.user.id,
        enrolment.sealedSecret,
        step,
        hashes,
        now,
        trx,
      );
      if (done) {
        await deps.audit.record(trx, {
          action: 'user.mfa_confirm',
          tenantId: session.tenant.id,
          actor: sessionActor(session),
          target: { type: 'user', id: session.user.id },
          details: { factor: 'totp', recovery_codes: codes.length },
        });
      }
      return done;
    });
    // Another confirmation (or a new start) won the race.
    if (!confirmed) throw new AppError('conflict', NOTHING_TO_CONFIRM_MESSAGE);
    deps.logger.info({ userId: session.user.id }, 'second factor enrolled');
    return { recoveryCodes: codes, confirmedAt: timestampFromDate(now) };
  };
}

export const WRONG_PASSWORD_MESSAGE = 'the password is wrong';

/**
 * The password as proof for removing the factor, counted like a login attempt (login.ts
 * admitGuess, as ChangePassword does) so a stolen session cannot guess it here instead; a
 * refusal is recorded (`user.mfa_disable`, outcome failure, or denied when throttled).
 */
async function provePassword(deps: AdminDeps, session: SessionRecord, password: string): Promise<void> {
  const refused = (reason: 'wrong_password' | 'throttled') =>
    deps.audit.recordAlone({
      action: 'user.mfa_disable',
      tenantId: session.tenant.id,
      actor: sessionActor(session),
      target: { type: 'user', id: session.user.id },
      outcome: reason === 'throttled' ? 'denied' : 'failure',
      details: { factor: 'totp', proof: 'password', reason },
    });
  const guess = guessClient(deps, '', undefined, '');
  try {
    await admitGuess(deps, session.user.email, guess, false);
  } catch (err) {
    if (err instanceof AppError && err.code === 'rate_limited') await refused('throttled');
    throw err;
  }
  const user = await deps.accounts.findUserByEmail(session.user.email);
  if (!user || user.id !== session.user.id || !(await deps.passwords.verify(user.passwordHash, password))) {
    await countFailure(deps, session.user.email);
    await refused('wrong_password');
    throw new AppError('forbidden', WRONG_PASSWORD_MESSAGE);
  }
  await deps.loginThrottle.clear(clientLimit(deps, session.user.email, guess).key);
}

/**
 * DisableTotp: needs a current code or an unused recovery code (the second factor itself), or
 * the password (throttled like a login). The enrolment and its recovery codes go.
 */
export function disableTotp(deps: AdminDeps): Impl['disableTotp'] {
  return async (req) => {
    const session = await ownLogin(deps, req.principal, 'act');
    const enrolment = await deps.secondFactors.find(session.user.id);
    if (!enrolment) throw new AppError('not_found', NOT_ENROLLED_MESSAGE);
    let proof: 'totp' | 'recovery_code' | 'password';
    if (req.code.trim() !== '' && enrolment.status === 'confirmed') {
      proof = await deps.secondFactor.verify(session.user, req.code, {
        tenantId: session.tenant.id,
        clientIp: attemptIp(''),
      });
    } else if (req.password !== '') {
      await provePassword(deps, session, req.password);
      proof = 'password';
    } else {
      throw new AppError('invalid_request', DISABLE_NEEDS_PROOF_MESSAGE);
    }
    await deps.audit.change(async (trx) => {
      await deps.secondFactors.remove(session.user.id, trx);
      await deps.audit.record(trx, {
        action: 'user.mfa_disable',
        tenantId: session.tenant.id,
        actor: sessionActor(session),
        target: { type: 'user', id: session.user.id },
        details: { factor: 'totp', proof, was: enrolment.status },
      });
    });
    deps.logger.info({ userId: session.user.id, proof }, 'second factor removed');
    return {};
  };
}

/**
 * RenewRecoveryCodes: ten new recovery codes for a confirmed factor, proven by a current code
 * (or an unused recovery code); every earlier code stops working. Without it, a user who lost
 * their codes could only get new ones by removing the factor.
 */
export function renewRecoveryCodes(deps: AdminDeps): Impl['renewRecoveryCodes'] {
  return async (req) => {
    const session = await ownLogin(deps, req.principal, 'act');
    if (!(await deps.secondFactors.isEnrolled(session.user.id))) {
      throw new AppError('not_found', NOT_ENROLLED_MESSAGE);
    }
    if (req.code.trim() === '') throw new AppError('invalid_request', RENEW_NEEDS_CODE_MESSAGE);
    const proof = await deps.secondFactor.verify(session.user, req.code, {
      tenantId: session.tenant.id,
      clientIp: attemptIp(''),
    });
    const { codes, hashes } = newRecoveryCodeSet();
    const renewed = await deps.audit.change(async (trx) => {
      const done = await deps.secondFactors.replaceRecoveryCodes(
        session.user.id,
        hashes,
        deps.clock.now(),
        trx,
      );
      if (done) {
        await deps.audit.record(trx, {
          action: 'user.mfa_recovery_codes',
          tenantId: session.tenant.id,
          actor: sessionActor(session),
          target: { type: 'user', id: session.user.id },
          details: { factor: 'totp', proof, recovery_codes: codes.length },
        });
      }
      return done;
    });
    // Removed between the check and the transaction.
    if (!renewed) throw new AppError('not_found', NOT_ENROLLED_MESSAGE);
    deps.logger.info({ userId: session.user.id, proof }, 'recovery codes renewed');
    return { recoveryCodes: codes };
  };
}

export function getMfaStatus(deps: AdminDeps): Impl['getMfaStatus'] {
  return async (req) => {
    const session = await ownLogin(deps, req.principal, 'enrol');
    const enrolment = await deps.secondFactors.find(session.user.id);
    const confirmed = enrolment?.status === 'confirmed';
    return {
      totpEnabled: confirmed,
      ...(confirmed && enrolment.confirmedAt
        ? { confirmedAt: timestampFromDate(enrolment.confirmedAt) }
        : {}),
      recoveryCodesLeft: confirmed ? await deps.secondFactors.recoveryCodesLeft(session.user.id) : 0,
      tenantRequiresMfa: await deps.secondFactors.requireMfa(session.tenant.id),
    };
  };
}

export function getTenantSettings(deps: AdminDeps): Impl['getTenantSettings'] {
  return async (req) => {
    const session = await ownLogin(deps, req.principal, 'act');
    return { requireMfa: await deps.secondFactors.requireMfa(session.tenant.id) };
  };
}

/** The owner turns `require_mfa` on or off; turning it on needs the owner to have a second factor. */
export function updateTenantSettings(deps: AdminDeps): Impl['updateTenantSettings'] {
  return async (req) => {
    const session = await ownLogin(deps, req.principal, 'act');
    if (session.role !== ROLES.owner) throw new AppError('forbidden', OWNER_ONLY_MESSAGE);
    if (req.requireMfa === undefined) {
      return { requireMfa: await deps.secondFactors.requireMfa(session.tenant.id) };
    }
    const requireMfa = req.requireMfa;
    if (requireMfa && !(await deps.secondFactors.isEnrolled(session.user.id))) {
      throw new AppError(
        'conflict',
        'enrol a second factor yourself before requiring one of every member (POST /admin/v1/auth/mfa/totp)',
      );
    }
    await deps.audit.change(async (trx) => {
      await deps.secondFactors.setRequireMfa(session.tenant.id, requireMfa, trx);
      await deps.audit.record(trx, {
        action: 'tenant.settings_change',
        tenantId: session.tenant.id,
        actor: sessionActor(session),
        target: { type: 'tenant', id: session.tenant.id },
        details: { require_mfa: requireMfa },
      });
    });
    deps.logger.info({ tenantId: session.tenant.id, requireMfa }, 'tenant settings changed');
    return { requireMfa };
  };
}
