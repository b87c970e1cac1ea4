import type { AdminService } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { newId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { hashToken, newToken } from '@relayplane/shared/tokens';
import { normaliseEmail } from '../domain/validation.ts';
import { throttleKeys } from '../redis/keys.ts';
import type { UserRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';
import { enforceLimits, type Limit } from './limits.ts';
import { sessionMessage } from './messages.ts';
import { clientOrigin } from './sessions.ts';

export const INVALID_CREDENTIALS_MESSAGE = 'invalid email or password';
export const LOGIN_RATE_LIMITED_MESSAGE = 'too many login attempts; retry later';

/** Which throttle refused an attempt, in its event. */
type ThrottleName = 'account' | 'ip' | 'account_ip';

/** A login limit and the throttle it is, in its refusal's event. */
interface LoginLimit extends Limit {
  throttle: ThrottleName;
}

/**
 * The limits a password guess on an account counts against (login and password change): the
 * account from every client IP (loose: an attacker rotating IPs is slowed, the owner elsewhere
 * is not locked out) and the account from this client IP (tight). An unknown IP (`''`) is one
 * client for the tight limit.
 */
export function accountLimits(
  deps: Pick<AdminDeps, 'loginLimits'>,
  email: string,
  clientIp: string,
): { account: LoginLimit; accountIp: LoginLimit } {
  return {
    account: {
      throttle: 'account',
      key: throttleKeys.loginAccount(email),
      max: deps.loginLimits.maxPerAccount,
    },
    accountIp: {
      throttle: 'account_ip',
      key: throttleKeys.loginAccountIp(email, clientIp),
      max: deps.loginLimits.maxPerAccountAndIp,
    },
  };
}

/** The client IP of a login or password change: the request context's (the gateway's), else the request's. */
export function attemptIp(fallbackIp: string): string {
  return clientOrigin(fallbackIp).ip ?? '';
}

/**
 * Counts the attempt against the account (all IPs), the client IP (none when it is unknown) and
 * the account from that IP. Over a limit: records the refusal when it is the first of its
 * throttle key's window (stores/throttled-refusals.ts), then answers `rate_limited`.
 */
function countAttempt(deps: AdminDeps, email: string, clientIp: string): Promise<void> {
  const { account, accountIp } = accountLimits(deps, email, clientIp);
  // The order decides which key a refusal over several limits is recorded under: the broadest
  // (fewest events: one per account or per IP and window), the account and IP pair last.
  const limits: LoginLimit[] = [account];
  if (clientIp !== '') {
    limits.push({ throttle: 'ip', key: throttleKeys.loginIp(clientIp), max: deps.loginLimits.maxPerIp });
  }
  limits.push(accountIp);
  return enforceLimits(deps.loginThrottle, limits, LOGIN_RATE_LIMITED_MESSAGE, async (exceeded) => {
    // One key per refusal: the first limit (in the order above) it is over.
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
  });
}

/** What firstMembership is asked for an unknown email: a query like a known one's, finding nothing. */
const NO_USER_ID = '';

/**
 * Login: checks the password and opens a session in the user's first tenant. An unknown
 * email costs one argon2 verification like a wrong password, and both answer the same.
 * Every attempt is counted first: a throttled attempt answers `rate_limited` without any
 * password verification. A successful login clears the count of its account from its client IP
 * only: the account's count from every IP and the IP's count stay, so the owner logging in
 * gives an attacker elsewhere no fresh budget.
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
    const clientIp = attemptIp(req.clientIp);
    await countAttempt(deps, email, clientIp);
    const user = await deps.accounts.findUserByEmail(email);
    const verified = user
      ? await deps.passwords.verify(user.passwordHash, req.password)
      : await deps.passwords.verifyNobody(req.password);
    if (!user || !verified) {
      await recordRefusal(deps, user, user ? 'wrong_password' : 'unknown_email');
      throw new AppError('unauthenticated', INVALID_CREDENTIALS_MESSAGE);
    }

    // A user removed from every tenant has nowhere to act; same answer as a wrong password.
    const membership = await deps.accounts.firstMembership(user.id);
    if (!membership) {
      await recordRefusal(deps, user, 'no_membership');
      throw new AppError('unauthenticated', INVALID_CREDENTIALS_MESSAGE);
    }

    const token = newToken('userSession');
    const now = deps.clock.now();
    const session = {
      id: newId('session'),
      createdAt: now,
      expiresAt: new Date(now.getTime() + deps.sessionTtlSeconds * 1000),
      lastSeenAt: null,
      user,
      tenant: membership.tenant,
      role: membership.role,
    };
    // The session and its event commit together.
    await deps.sessions.create(
      {
        id: session.id,
        tokenHash: hashToken(token),
        userId: user.id,
        tenantId: membership.tenant.id,
        createdAt: session.createdAt,
        expiresAt: session.expiresAt,
        ...clientOrigin(req.clientIp),
      },
      (trx) =>
        deps.audit.record(trx, {
          action: 'session.login',
          tenantId: membership.tenant.id,
          actor: { type: 'user', id: user.id },
          target: { type: 'session', id: session.id },
          details: { email: user.email },
        }),
    );
    await deps.loginThrottle.clear(throttleKeys.loginAccountIp(email, clientIp));
    deps.logger.info({ userId: user.id, sessionId: session.id, clientIp: req.clientIp }, 'user logged in');
    return { token, session: sessionMessage(session) };
  };
}
