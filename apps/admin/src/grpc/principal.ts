import type { RoleName } from '@relayplane/contract/contract';
import { AppError, INVALID_TOKEN_MESSAGE, MFA_ENROLMENT_REQUIRED_MESSAGE } from '@relayplane/contract/errors';
import { type Principal, PrincipalKind } from '@relayplane/proto/admin';
import { deny, type Permission, type Subject } from '@relayplane/shared/iam';
import { effectiveScopes } from '../domain/identity-tokens.ts';
import type { SessionRecord } from '../stores/records.ts';
import type { LiveSession } from '../stores/sessions.ts';
import type { AdminDeps } from './deps.ts';

/**
 * Re-reads the session a principal claims to act through. The gateway built the principal
 * from Authenticate, but the session may have been logged out, expired or lost its
 * membership since, and the role always comes from the database, never from the request.
 */
/** A user session allowed to act: refused (403) while its tenant requires a second factor its user lacks. */
export function requireSecondFactorIfRequired(session: LiveSession): void {
  if (session.mfaMissing) throw new AppError('forbidden', MFA_ENROLMENT_REQUIRED_MESSAGE);
}

export async function requireUserSession(
  deps: Pick<AdminDeps, 'sessions' | 'clock'>,
  principal: Principal | undefined,
): Promise<LiveSession> {
  if (!principal || principal.kind !== PrincipalKind.USER_SESSION || principal.sessionId === '') {
    throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  }
  const session = await deps.sessions.findLiveById(principal.sessionId, deps.clock.now());
  if (!session || session.user.id !== principal.userId || session.tenant.id !== principal.tenantId) {
    throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  }
  return session;
}

/** Who a call acts as, re-read from the database. */
export interface Actor {
  kind: PrincipalKind;
  tenantId: string;
  role: RoleName;
  /** Bots and identity tokens act within this project only; undefined for users. */
  projectId: string | undefined;
  /** Set for user sessions (and CLI tokens). */
  session: SessionRecord | undefined;
  /** The bot a bot token or an identity token acts as. */
  botId: string | undefined;
  /** Set for identity tokens. */
  identityTokenId: string | undefined;
  /** Identity tokens: what the token holds now (its scopes its root user's role still grants). */
  scopes: readonly string[] | undefined;
  /** Identity tokens: the user at the root of the creation chain, and the token's expiry. */
  identity: { rootUserId: string; rootSessionId: string | null; expiresAt: Date } | undefined;
  /** Who did it, for logs: a user, a bot or an identity token id. */
  log: { userId: string } | { botId: string } | { identityTokenId: string; botId: string };
}

export function subjectOfActor(actor: Actor): Subject {
  return { kind: actor.kind, role: actor.role, scopes: actor.scopes };
}

/**
 * The actor behind a principal, re-read from the database, when it holds `permission`
 * (docs/iam.md; the decision itself is `deny` in @relayplane/shared/iam): else 403 naming the
 * permission. A logged-out session, a revoked or expired token, a deleted bot: 401.
 */
export async function requireActor(
  deps: Pick<AdminDeps, 'sessions' | 'bots' | 'identityTokens' | 'clock'>,
  principal: Principal | undefined,
  permission: Permission,
): Promise<Actor> {
  const actor = await actorOf(deps, principal);
  const denied = deny(subjectOfActor(actor), permission);
  if (denied) throw new AppError('forbidden', denied);
  return actor;
}

async function actorOf(
  deps: Pick<AdminDeps, 'sessions' | 'bots' | 'identityTokens' | 'clock'>,
  principal: Principal | undefined,
): Promise<Actor> {
  switch (principal?.kind) {
    case PrincipalKind.USER_SESSION: {
      const session = await requireUserSession(deps, principal);
      requireSecondFactorIfRequired(session);
      return {
        kind: PrincipalKind.USER_SESSION,
        tenantId: session.tenant.id,
        role: session.role,
        projectId: undefined,
        session,
        botId: undefined,
        identityTokenId: undefined,
        scopes: undefined,
        identity: undefined,
        log: { userId: session.user.id },
      };
    }
    case PrincipalKind.BOT: {
      const bot = await deps.bots.find(principal.tenantId, principal.projectId, principal.botId);
      if (!bot) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      return {
        kind: PrincipalKind.BOT,
        tenantId: bot.tenantId,
        role: bot.role,
        projectId: bot.projectId,
        session: undefined,
        botId: bot.id,
        identityTokenId: undefined,
        scopes: undefined,
        identity: undefined,
        log: { botId: bot.id },
      };
    }
    case PrincipalKind.IDENTITY: {
      const found = await deps.identityTokens.findLiveById(principal.identityTokenId, deps.clock.now());
      if (!found || found.bot.tenantId !== principal.tenantId) {
        throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      }
      return {
        kind: PrincipalKind.IDENTITY,
        tenantId: found.bot.tenantId,
        role: found.bot.role,
        projectId: found.bot.projectId,
        session: undefined,
        botId: found.bot.id,
        identityTokenId: found.token.id,
        scopes: effectiveScopes(found.token.scopes, found.rootUserRole),
        identity: {
          rootUserId: found.token.rootUserId,
          rootSessionId: found.token.rootSessionId,
          expiresAt: found.token.expiresAt,
        },
        log: { identityTokenId: found.token.id, botId: found.bot.id },
      };
    }
    default:
      throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  }
}

/**
 * A user session (or CLI token) holding `permission`. For permissions that are never a
 * machine's (docs/iam.md), `requireActor` already refused bots and identity tokens with 403.
 */
export async function requireUserActor(
  deps: Pick<AdminDeps, 'sessions' | 'bots' | 'identityTokens' | 'clock'>,
  principal: Principal | undefined,
  permission: Permission,
): Promise<SessionRecord> {
  const actor = await requireActor(deps, principal, permission);
  if (!actor.session) throw new AppError('forbidden', 'this operation needs a user session');
  return actor.session;
}
