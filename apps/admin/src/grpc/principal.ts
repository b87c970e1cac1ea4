import { type Principal, PrincipalKind } from '@relayplane/proto/admin';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/shared/errors';
import type { SessionRecord } from '../stores/records.ts';
import type { AdminDeps } from './deps.ts';

/**
 * Re-reads the session a principal claims to act through. The gateway built the principal
 * from Authenticate, but the session may have been logged out, expired or lost its
 * membership since, and the role always comes from the database, never from the request.
 */
export async function requireUserSession(
  deps: Pick<AdminDeps, 'sessions' | 'clock'>,
  principal: Principal | undefined,
): Promise<SessionRecord> {
  if (!principal || principal.kind !== PrincipalKind.USER_SESSION || principal.sessionId === '') {
    throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  }
  const session = await deps.sessions.findLiveById(principal.sessionId, deps.clock.now());
  if (!session || session.user.id !== principal.userId || session.tenant.id !== principal.tenantId) {
    throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  }
  return session;
}
