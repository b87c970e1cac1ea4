import type { AdminService } from '@relayplane/proto/admin';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/shared/errors';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { hashToken, parseToken } from '@relayplane/shared/tokens';
import type { AdminDeps } from './deps.ts';
import { principalMessage, sessionMessage } from './messages.ts';

/** last_seen_at is advisory; writing it at most once a minute keeps Authenticate a read. */
const LAST_SEEN_RESOLUTION_MS = 60_000;

/** Authenticate: a user session token → the principal it acts as. */
export function authenticate(deps: AdminDeps): ServiceImpl<typeof AdminService>['authenticate'] {
  return async (req) => {
    // A malformed token, a bad checksum or another kind of token never reaches the database.
    if (parseToken(req.token) !== 'userSession') throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    const now = deps.clock.now();
    const session = await deps.sessions.findLiveByTokenHash(hashToken(req.token), now);
    if (!session) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    if (!session.lastSeenAt || now.getTime() - session.lastSeenAt.getTime() >= LAST_SEEN_RESOLUTION_MS) {
      await deps.sessions.touch(session.id, now);
    }
    return { principal: principalMessage(session), session: sessionMessage(session) };
  };
}
