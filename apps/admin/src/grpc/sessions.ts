/**
 * Sessions a user controls (docs/iam.md, Sessions): the caller's login sessions and CLI tokens,
 * listed without their tokens, and ended one by one or all but the current one. Ending a
 * session deletes its row, like logout: the gateway does not cache session authentication
 * (every request asks Authenticate, and every admin call re-reads the session), so a revoked
 * token answers 401 on every gateway from the next request on.
 */
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import { type AdminService, type Principal, PrincipalKind } from '@relayplane/proto/admin';
import { currentRequestContext } from '@relayplane/shared/request-context';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { sessionActor } from '../audit/actor.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { SessionInfoRecord } from '../stores/sessions.ts';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { requireUserSession } from './principal.ts';

export const SESSION_NOT_FOUND_MESSAGE = 'session not found';
export const USER_SESSION_NEEDED_MESSAGE =
  'this operation needs a user session; bot tokens and identity tokens are not accepted';

/** Where the request came from, as the gateway sent it (request context); undefined when unknown. */
export function clientOrigin(fallbackIp = ''): { ip: string | undefined; userAgent: string | undefined } {
  const context = currentRequestContext();
  const ip = context?.clientIp ?? (fallbackIp.trim() === '' ? undefined : fallbackIp.trim());
  return { ip, userAgent: context?.userAgent };
}

/** The caller's own login session or CLI token; a bot or identity token: forbidden. */
export function requireOwnSession(
  deps: Pick<AdminDeps, 'sessions' | 'clock'>,
  principal: Principal | undefined,
): Promise<SessionRecord> {
  if (principal?.kind === PrincipalKind.BOT || principal?.kind === PrincipalKind.IDENTITY) {
    throw new AppError('forbidden', USER_SESSION_NEEDED_MESSAGE);
  }
  return requireUserSession(deps, principal);
}

function sessionInfoMessage(s: SessionInfoRecord, currentId: string) {
  return {
    id: s.id,
    kind: s.kind,
    createdAt: timestampFromDate(s.createdAt),
    ...(s.lastUsedAt ? { lastUsedAt: timestampFromDate(s.lastUsedAt) } : {}),
    expiresAt: timestampFromDate(s.expiresAt),
    ip: s.ip ?? '',
    userAgent: s.userAgent ?? '',
    current: s.id === currentId,
  };
}

/** ListSessions: a page of the caller's unexpired sessions and CLI tokens, newest first. */
export function listSessions(deps: AdminDeps): ServiceImpl<typeof AdminService>['listSessions'] {
  return async (req) => {
    const session = await requireOwnSession(deps, req.principal);
    const page = await deps.sessions.listForUser(session.user.id, deps.clock.now(), pageRequest(req));
    return {
      sessions: page.items.map((s) => sessionInfoMessage(s, session.id)),
      nextCursor: nextCursor(page),
    };
  };
}

/**
 * RevokeSession: ends one of the caller's sessions or CLI tokens (the current one too: that
 * is a logout). Another user's session, like one that does not exist: not_found.
 */
export function revokeSession(deps: AdminDeps): ServiceImpl<typeof AdminService>['revokeSession'] {
  return async (req) => {
    const session = await requireOwnSession(deps, req.principal);
    if (!isId('session', req.sessionId)) throw new AppError('not_found', SESSION_NOT_FOUND_MESSAGE);
    // The revocation and its event commit together.
    const deleted = await deps.sessions.delete(req.sessionId, session.user.id, (trx) =>
      deps.audit.record(trx, {
        action: 'session.revoke',
        tenantId: session.tenant.id,
        actor: sessionActor(session),
        target: { type: 'session', id: req.sessionId },
        details: { scope: 'one', current: req.sessionId === session.id },
      }),
    );
    if (!deleted) throw new AppError('not_found', SESSION_NOT_FOUND_MESSAGE);
    deps.logger.info(
      { userId: session.user.id, sessionId: req.sessionId, current: req.sessionId === session.id },
      'session revoked',
    );
    return {};
  };
}

/**
 * RevokeOtherSessions ("sign out everywhere"): ends every access of the caller but the current
 * session, as a password change does (stores/sessions.ts endOthersIn): other sessions and CLI
 * tokens, approved unredeemed device grants, and, unless `keep_identity_tokens`, the identity
 * tokens rooted at the user except those created under the current session.
 */
export function revokeOtherSessions(
  deps: AdminDeps,
): ServiceImpl<typeof AdminService>['revokeOtherSessions'] {
  return async (req) => {
    const session = await requireOwnSession(deps, req.principal);
    // One event for all of them, with the counts, in the same transaction.
    const revoked = await deps.sessions.deleteOthers(
      {
        userId: session.user.id,
        keepId: session.id,
        now: deps.clock.now(),
        revokeIdentityTokens: !req.keepIdentityTokens,
      },
      (trx, count) =>
        deps.audit.record(trx, {
          action: 'session.revoke',
          tenantId: session.tenant.id,
          actor: sessionActor(session),
          target: { type: 'user', id: session.user.id },
          details: {
            scope: 'others',
            revoked: count.sessions,
            revoked_device_grants: count.deviceGrants,
            revoked_identity_tokens: count.identityTokens,
            kept_session_id: session.id,
          },
        }),
    );
    deps.logger.info({ userId: session.user.id, sessionId: session.id, revoked }, 'other sessions revoked');
    return {
      revoked: revoked.sessions,
      revokedDeviceGrants: revoked.deviceGrants,
      revokedIdentityTokens: revoked.identityTokens,
    };
  };
}
