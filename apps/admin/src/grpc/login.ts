import type { RoleName } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { hashToken, newToken } from '@relayplane/contract/tokens';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { normaliseEmail } from '../domain/validation.ts';
import { throttleKeys } from '../redis/keys.ts';
import type { KnownDevice } from '../security/device-tokens.ts';
import type { TenantRecord, UserRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';
import { type Exceeded, enforceLimits, type Limit, throttleClientOf } from './limits.ts';
import { sessionMessage } from './messages.ts';
import { clientOrigin } from './sessions.ts';

export const INVALID_CREDENTIALS_MESSAGE = 'invalid email or password';
export const LOGIN_RATE_LIMITED_MESSAGE = 'too many login attempts; retry later';

/** Which throttle refused an attempt, in its event. */
type ThrottleName = 'account' | 'ip' | 'account_ip' | 'device';

/** A login limit and the throttle it is, in its refusal's event. */
interface LoginLimit extends Limit {
  throttle: ThrottleName;
}

/**
 * A password guess's client: its throttle client (IPv6 by /64, '' when unknown) and, when it
 * presented a valid device token for the account, the known device.
 */
export interface GuessClient {
  client: string;
  device: KnownDevice | undefined;
}

/**
 * The tight limit a password guess on an account counts against before the password is checked
 * (login, password change, the second step): the account from this known device, else the
 * account from this client (one /64 of IPv6; an unknown IP is one client).
 */
export function clientLimit(
  deps: Pick<AdminDeps, 'loginLimits'>,
  email: string,
  guess: GuessClient,
): LoginLimit {
  return guess.device
    ? {
        throttle: 'device',
        key: throttleKeys.loginDevice(guess.device.nonce),
        max: deps.loginLimits.maxPerDevice,
      }
    : {
        throttle: 'account_ip',
        key: throttleKeys.loginAccountIp(email, guess.client),
        max: deps.loginLimits.maxPerAccountAndIp,
      };
}

/** The client of a login or password change: the request context's IP (the gateway's), else the request's. */
export function attemptIp(fallbackIp: string): string {
  return clientOrigin(fallbackIp).ip ?? '';
}

/** The guess's client, with its device when `deviceToken` is one minted for `userId`. */
export function guessClient(
  deps: AdminDeps,
  fallbackIp: string,
  userId: string | undefined,
  deviceToken: string,
): GuessClient {
  const ip = attemptIp(fallbackIp);
  return {
    client: ip === '' ? '' : throttleClientOf(deps, ip),
    device:
      userId === undefined ? undefined : deps.deviceTokens.verify(deviceToken, userId, deps.clock.now()),
  };
}

/**
 * Counts a password guess before its password is checked, so a refused guess costs no argon2
 * hash (docs/iam.md, "Login throttling"):
 * - against the client IP across accounts (`ip`, per /64) and the account from this client
 *   (`account_ip`, or `device` for a known device): every attempt counts;
 * - the account-wide limit counts failures only (countFailure) and refuses only unknown clients:
 *   past it, they share one attempt per `ADMIN_LOGIN_SLOW_SECONDS` (a 429 with a `Retry-After` of
 *   at most that), never the rest of the window. A known device is never refused by it.
 * Over a limit: the refusal is recorded when it is the first of its throttle key's window
 * (stores/throttled-refusals.ts), then `rate_limited`.
 */
export async function admitGuess(
  deps: AdminDeps,
  email: string,
  guess: GuessClient,
  /** Records a refusal as `session.login_failed` (login); false: the caller records its own. */
  recordLoginRefusal = true,
): Promise<void> {
  const onExceeded = recordLoginRefusal
    ? (exceeded: Exceeded<LoginLimit>[]) => recordThrottled(deps, email, exceeded)
    : undefined;
  const limits: LoginLimit[] = [];
  if (guess.client !== '') {
    limits.push({ throttle: 'ip', key: throttleKeys.loginIp(guess.client), max: deps.loginLimits.maxPerIp });
  }
  limits.push(clientLimit(deps, email, guess));
  await enforceLimits(deps.loginThrottle, limits, LOGIN_RATE_LIMITED_MESSAGE, onExceeded);
  if (guess.device) return;
  const account = throttleKeys.loginAccount(email);
  if ((await deps.loginThrottle.peek(account)) < deps.loginLimits.maxPerAccount) return;
  // Past the account-wide limit: one attempt per slow window for every unknown client together.
  await enforceLimits(
    deps.loginSlowdown,
    [{ throttle: 'account', key: throttleKeys.loginAccountSlow(email), max: 1 }],
    LOGIN_RATE_LIMITED_MESSAGE,
    onExceeded,
  );
}

/** A wrong password (or second-factor code): one failure against the account-wide limit. */
export async function countFailure(deps: AdminDeps, email: string): Promise<void> {
  await deps.loginThrottle.hit(throttleKeys.loginAccount(email));
}

/** One event per refused throttle key and window (the first key over its limit), with the count. */
async function recordThrottled(
  deps: AdminDeps,
  email: string,
  exceeded: Exceeded<LoginLimit>[],
): Promise<void> {
  const first = exceeded[0];
  if (!first) return;
  const { throttle } = first.limit;
  const refused = await deps.throttledRefusals.claim(first.limit.key, first.resetInMs);
  if (refused === 0) return;
  try {
    const user = await deps.accounts.findUserByEmail(email);
    await recordRefusal(deps, user, 'throttled', { throttle, refused });
  } catch (err) {
    await deps.throttledRefusals.release(first.limit.key, refused);
    throw err;
  }
}

/** What firstMembership is asked for an unknown email: a query like a known one's, finding nothing. */
const NO_USER_ID = '';

/**
 * Login: checks the password and opens a session in the user's first tenant, or, for a user
 * with a second factor, answers `mfa_required` and a challenge (LoginMfa finishes it). An unknown
 * email costs one argon2 verification like a wrong password, and both answer the same. Every
 * attempt is admitted first (admitGuess): a throttled attempt answers `rate_limited` without any
 * password verification. A successful login clears the count of its account from its client
 * (or device) only: the account's failures and the IP's count stay, so the owner logging in
 * gives an attacker elsewhere no fresh budget. The session row is written only while the
 * password hash verified and the user's credentials epoch are still current, so a login whose
 * check overlapped a password change keeps no session.
 */
export function login(deps: AdminDeps): ServiceImpl<typeof AdminService>['login'] {
  const attempt = attemptLogin(deps);
  const logins = deps.metrics?.logins;
  if (!logins) return attempt;
  return async (req, call) => {
    try {
      const result = await attempt(req, call);
      logins.success.inc();
      return result;
    } catch (err) {
      // Other errors (unavailable, internal) are no login outcome; the gRPC metrics count them.
      if (err instanceof AppError) {
        if (err.code === 'rate_limited') logins.throttled.inc();
        else if (err.code === 'unauthenticated' || err.code === 'invalid_request') logins.failure.inc();
      }
      throw err;
    }
  };
}

/** Why a login was refused, in its `session.login_failed` event. */
type LoginRefusal = 'unknown_email' | 'wrong_password' | 'no_membership' | 'throttled';

/**
 * Records a refused login (`session.login_failed`; throttled: outcome `denied`, else
 * `failure`) on its own: the actor is anonymous, the target the account when it exists (in the
 * chain of its first tenant), else no tenant and no id. The typed email of an unknown account is
 * not recorded: people type passwords into email fields. The membership is looked up for an
 * unknown email too (finding nothing), so both answers cost the same queries.
 */
async function recordRefusal(
  deps: AdminDeps,
  user: UserRecord | undefined,
  reason: LoginRefusal,
  throttled?: { throttle: ThrottleName; refused: number },
): Promise<void> {
  const membership =
    reason === 'no_membership' ? undefined : await deps.accounts.firstMembership(user?.id ?? NO_USER_ID);
  await deps.audit.recordAlone({
    action: 'session.login_failed',
    tenantId: membership?.tenant.id ?? null,
    actor: { type: 'anonymous', id: '' },
    target: { type: 'user', id: user?.id ?? '' },
    outcome: reason === 'throttled' ? 'denied' : 'failure',
    details: { reason, ...(user ? { email: user.email } : {}), ...(throttled ?? {}) },
  });
}

function attemptLogin(deps: AdminDeps): ServiceImpl<typeof AdminService>['login'] {
  return async (req) => {
    if (req.email.trim() === '' || req.password === '') {
      throw new AppError('invalid_request', 'email and password are required');
    }
    const email = normaliseEmail(req.email);
    const user = await deps.accounts.findUserByEmail(email);
    const guess = guessClient(deps, req.clientIp, user?.id, req.deviceToken);
    await admitGuess(deps, email, guess);
    const verified = user
      ? await deps.passwords.verify(user.passwordHash, req.password)
      : await deps.passwords.verifyNobody(req.password);
    if (!user || !verified) {
      await countFailure(deps, email);
      await recordRefusal(deps, user, user ? 'wrong_password' : 'unknown_email');
      throw new AppError('unauthenticated', INVALID_CREDENTIALS_MESSAGE);
    }

    // A user removed from every tenant has nowhere to act; same answer as a wrong password.
    const membership = await deps.accounts.firstMembership(user.id);
    if (!membership) {
      await recordRefusal(deps, user, 'no_membership');
      throw new AppError('unauthenticated', INVALID_CREDENTIALS_MESSAGE);
    }

    if (await deps.secondFactor.isEnrolled(user.id)) {
      const mfaToken = newToken('loginChallenge');
      const now = deps.clock.now();
      await deps.loginChallenges.create(
        hashToken(mfaToken),
        {
          userId: user.id,
          tenantId: membership.tenant.id,
          passwordHash: user.passwordHash,
          credentialsEpoch: user.credentialsEpoch,
          deviceNonce: guess.device?.nonce ?? null,
          expiresAt: new Date(now.getTime() + LOGIN_CHALLENGE_TTL_SECONDS * 1000),
        },
        now,
      );
      deps.logger.info(
        { userId: user.id, clientIp: req.clientIp },
        'password accepted: second factor required',
      );
      return { mfaRequired: true, mfaToken };
    }

    const opened = await openSession(deps, {
      user,
      tenant: membership.tenant,
      role: membership.role,
      passwordHash: user.passwordHash,
      credentialsEpoch: user.credentialsEpoch,
      clientIp: req.clientIp,
      factor: 'password',
    });
    await deps.loginThrottle.clear(clientLimit(deps, email, guess).key);
    return {
      ...opened,
      deviceToken: guess.device?.token ?? deps.deviceTokens.mint(user.id, deps.clock.now()).token,
    };
  };
}

/** How long the second login step may take: the `mfa_token`'s life. */
export const LOGIN_CHALLENGE_TTL_SECONDS = 300;

/**
 * Opens the session of a verified login, only while the password hash verified and the user's
 * credentials epoch are still current (else the same 401 as a wrong password: the password
 * changed while it was checked). The session and its event commit together.
 */
export async function openSession(
  deps: AdminDeps,
  login: {
    user: UserRecord;
    tenant: TenantRecord;
    role: RoleName;
    passwordHash: string;
    credentialsEpoch: number;
    clientIp: string;
    /** How the login was proven, in its event: the password alone, or with a second factor. */
    factor: 'password' | 'totp' | 'recovery_code';
  },
): Promise<{ token: string; session: ReturnType<typeof sessionMessage> }> {
  const { user } = login;
  const token = newToken('userSession');
  const now = deps.clock.now();
  const session = {
    id: newId('session'),
    createdAt: now,
    expiresAt: new Date(now.getTime() + deps.sessionTtlSeconds * 1000),
    lastSeenAt: null,
    user,
    tenant: login.tenant,
    role: login.role,
  };
  const created = await deps.sessions.create(
    {
      id: session.id,
      tokenHash: hashToken(token),
      userId: user.id,
      tenantId: login.tenant.id,
      createdAt: session.createdAt,
      expiresAt: session.expiresAt,
      credentialsEpoch: login.credentialsEpoch,
      passwordHash: login.passwordHash,
      ...clientOrigin(login.clientIp),
    },
    (trx) =>
      deps.audit.record(trx, {
        action: 'session.login',
        tenantId: login.tenant.id,
        actor: { type: 'user', id: user.id },
        target: { type: 'session', id: session.id },
        details: {
          email: user.email,
          ...(login.factor === 'password' ? {} : { second_factor: login.factor }),
        },
      }),
  );
  if (!created) {
    deps.logger.warn(
      { userId: user.id },
      'login refused: the password or credentials changed while it was checked',
    );
    throw new AppError('unauthenticated', INVALID_CREDENTIALS_MESSAGE);
  }
  deps.logger.info({ userId: user.id, sessionId: session.id, clientIp: login.clientIp }, 'user logged in');
  return { token, session: sessionMessage(session) };
}
