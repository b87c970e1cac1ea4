import { AppError } from '@relayplane/contract/errors';
import { hashToken, parseToken } from '@relayplane/contract/tokens';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { admitGuess, clientLimit, countFailure, guessClient, openSession } from './login.ts';

export const MFA_TOKEN_INVALID_MESSAGE =
  'the mfa_token is invalid or expired; log in again with the password';
/** Wrong codes one challenge allows; then the password step must be repeated. */
export const MAX_CHALLENGE_FAILURES = 5;

/**
 * LoginMfa, the second login step: the `mfa_token` the password step answered (short-lived,
 * single use) and a current TOTP code or an unused recovery code → the session. The attempt is
 * throttled like a password (login.ts admitGuess, the same limits and counts); a wrong code counts
 * against the challenge (MAX_CHALLENGE_FAILURES, then it is void) and the account's failures.
 * The one correct code takes the challenge, so it opens at most one session, and only while the
 * password it proved and the user's credentials epoch are still current.
 */
export function loginMfa(deps: AdminDeps): ServiceImpl<typeof AdminService>['loginMfa'] {
  return async (req) => {
    if (req.mfaToken === '' || req.code.trim() === '') {
      throw new AppError('invalid_request', 'mfa_token and code are required');
    }
    if (parseToken(req.mfaToken) !== 'loginChallenge') {
      throw new AppError('unauthenticated', MFA_TOKEN_INVALID_MESSAGE);
    }
    const tokenHash = hashToken(req.mfaToken);
    const now = deps.clock.now();
    const challenge = await deps.loginChallenges.find(tokenHash, now, MAX_CHALLENGE_FAILURES);
    if (!challenge) throw new AppError('unauthenticated', MFA_TOKEN_INVALID_MESSAGE);
    const member = await deps.accounts.findMember(challenge.tenantId, challenge.userId);
    if (!member) throw new AppError('unauthenticated', MFA_TOKEN_INVALID_MESSAGE);
    const { user } = member;
    const guess = guessClient(deps, req.clientIp, user.id, req.deviceToken);
    await admitGuess(deps, user.email, guess);
    let factor: 'totp' | 'recovery_code';
    try {
      factor = await deps.secondFactor.verify(user, req.code, {
        tenantId: challenge.tenantId,
        clientIp: req.clientIp,
      });
    } catch (err) {
      if (err instanceof AppError && err.code === 'unauthenticated') {
        await deps.loginChallenges.fail(tokenHash);
        await countFailure(deps, user.email);
      }
      throw err;
    }
    // One correct code, one session: whoever takes the challenge opens it.
    if (!(await deps.loginChallenges.take(tokenHash, deps.clock.now()))) {
      throw new AppError('unauthenticated', MFA_TOKEN_INVALID_MESSAGE);
    }
    const opened = await openSession(deps, {
      user,
      tenant: member.tenant,
      role: member.role,
      passwordHash: challenge.passwordHash,
      credentialsEpoch: challenge.credentialsEpoch,
      clientIp: req.clientIp,
      factor,
    });
    await deps.loginThrottle.clear(clientLimit(deps, user.email, guess).key);
    return {
      ...opened,
      deviceToken: guess.device?.token ?? deps.deviceTokens.mint(user.id, deps.clock.now()).token,
    };
  };
}
