import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { hashToken, parseToken } from '@relayplane/contract/tokens';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { effectiveScopes } from '../domain/identity-tokens.ts';
import type { AdminDeps } from './deps.ts';
import {
  botMessage,
  botPrincipalMessage,
  identityPrincipalMessage,
  identityTokenMessage,
  principalMessage,
  sessionMessage,
} from './messages.ts';

/** last_seen_at / last_used_at are advisory; writing them at most once a minute keeps Authenticate a read. */
const LAST_SEEN_RESOLUTION_MS = 60_000;

type AuthenticateImpl = ServiceImpl<typeof AdminService>['authenticate'];

/** Authenticate: a user session token or a bot token → the principal it acts as. */
export function authenticate(deps: AdminDeps): AuthenticateImpl {
  return async (req) => {
    // A malformed token, a bad checksum or another kind of token never reaches the database.
    const kind = parseToken(req.token);
    if (kind === 'bot') return authenticateBot(deps, req.token);
    if (kind === 'identity') return authenticateIdentity(deps, req.token);
    // A CLI token (device flow) is a session row of its own kind: same lookup, same checks.
    if (kind !== 'userSession' && kind !== 'cli')
      throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    const now = deps.clock.now();
    const session = await deps.sessions.findLiveByTokenHash(hashToken(req.token), now);
    if (!session) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    // The first time the session cookie authenticates a login session, it is a browser's
    // (listed as `browser`): written at once; otherwise at most once a minute.
    const cookieSeen = req.via === 'cookie' && session.kind !== 'cli' && !session.browser;
    if (
      cookieSeen ||
      !session.lastSeenAt ||
      now.getTime() - session.lastSeenAt.getTime() >= LAST_SEEN_RESOLUTION_MS
    ) {
      // Advisory: a failed write never fails an authentication.
      try {
        await deps.sessions.touch(session.id, now, cookieSeen);
      } catch (err) {
        deps.logger.warn({ err, sessionId: session.id }, 'could not record session use');
      }
    }
    return {
      principal: principalMessage(session),
      session: sessionMessage(session),
      mfaEnrolmentRequired: session.mfaMissing,
    };
  };
}

/** An active bot key → the bot's principal (its tenant, project and role). */
async function authenticateBot(deps: AdminDeps, token: string): ReturnType<AuthenticateImpl> {
  const found = await deps.bots.findActiveByTokenHash(hashToken(token));
  if (!found) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  const { bot, key } = found;
  const now = deps.clock.now();
  const since = new Date(now.getTime() - LAST_SEEN_RESOLUTION_MS);
  if (!key.lastUsedAt || key.lastUsedAt < since) {
    // Advisory: a failed write never fails an authentication.
    try {
      await deps.bots.touchKey(key.id, now, since);
    } catch (err) {
      deps.logger.warn({ err, botKeyId: key.id }, 'could not record bot key use');
    }
  }
  return { principal: botPrincipalMessage(bot), bot: botMessage(bot) };
}

/** A live identity token → its principal: the bot it acts as, with the token's scopes. */
async function authenticateIdentity(deps: AdminDeps, token: string): ReturnType<AuthenticateImpl> {
  const now = deps.clock.now();
  const found = await deps.identityTokens.findLiveByTokenHash(hashToken(token), now);
  if (!found) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  const since = new Date(now.getTime() - LAST_SEEN_RESOLUTION_MS);
  if (!found.token.lastUsedAt || found.token.lastUsedAt < since) {
    // Advisory: a failed write never fails an authentication.
    try {
      await deps.identityTokens.touch(found.token.id, now, since);
    } catch (err) {
      deps.logger.warn({ err, identityTokenId: found.token.id }, 'could not record identity token use');
    }
  }
  return {
    principal: identityPrincipalMessage(
      found.token,
      found.bot,
      effectiveScopes(found.token.scopes, found.rootUserRole),
    ),
    bot: botMessage(found.bot),
    identityToken: identityTokenMessage(found.token),
  };
}
