import type { AdminService } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { newId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { hashToken, newToken } from '@relayplane/shared/tokens';
import { normaliseEmail } from '../domain/validation.ts';
import type { AdminDeps } from './deps.ts';
import { sessionMessage } from './messages.ts';

export const INVALID_CREDENTIALS_MESSAGE = 'invalid email or password';

/**
 * Login: checks the password and opens a session in the user's first tenant. An unknown
 * email costs one argon2 verification like a wrong password, and both answer the same.
 */
export function login(deps: AdminDeps): ServiceImpl<typeof AdminService>['login'] {
  return async (req) => {
    if (req.email.trim() === '' || req.password === '') {
      throw new AppError('invalid_request', 'email and password are required');
    }
    const user = await deps.accounts.findUserByEmail(normaliseEmail(req.email));
    const verified = user
      ? await deps.passwords.verify(user.passwordHash, req.password)
      : await deps.passwords.verifyNobody(req.password);
    if (!user || !verified) throw new AppError('unauthenticated', INVALID_CREDENTIALS_MESSAGE);

    // A user removed from every tenant has nowhere to act; same answer as a wrong password.
    const membership = await deps.accounts.firstMembership(user.id);
    if (!membership) throw new AppError('unauthenticated', INVALID_CREDENTIALS_MESSAGE);

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
    await deps.sessions.create({
      id: session.id,
      tokenHash: hashToken(token),
      userId: user.id,
      tenantId: membership.tenant.id,
      createdAt: session.createdAt,
      expiresAt: session.expiresAt,
    });
    deps.logger.info({ userId: user.id, sessionId: session.id, clientIp: req.clientIp }, 'user logged in');
    return { token, session: sessionMessage(session) };
  };
}
