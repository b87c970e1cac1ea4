import { timestampDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import { isId, newId } from '@relayplane/contract/ids';
import { hashToken, newToken } from '@relayplane/contract/tokens';
import { type AdminService, PrincipalKind } from '@relayplane/proto/admin';
import { PROJECT_PERMISSIONS, permissionsOf } from '@relayplane/shared/iam';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import {
  checkIdentityExpiry,
  checkIdentityScopes,
  IDENTITY_TOKEN_DISPLAY_PREFIX_LENGTH,
} from '../domain/identity-tokens.ts';
import type { AdminDeps } from './deps.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { identityTokenMessage } from './messages.ts';
import { type Actor, requireActor, subjectOfActor } from './principal.ts';
import { requireBot, requireProject } from './project-access.ts';
import { valid } from './valid.ts';

const IDENTITY_NOT_FOUND_MESSAGE = 'identity not found';
const IDENTITY_TOKEN_NOT_FOUND_MESSAGE = 'identity token not found';
const BOT_CALLER_MESSAGE =
  'identity tokens can be created with a user session or an identity token only; bot tokens are not accepted';

type Impl = ServiceImpl<typeof AdminService>;

/** The identity: a bot of the project (another project's or tenant's answers like a missing one). */
async function requireIdentity(deps: AdminDeps, actor: Actor, projectId: string, identityId: string) {
  return requireBot(
    deps,
    await requireProject(deps, actor, projectId),
    identityId,
    IDENTITY_NOT_FOUND_MESSAGE,
  );
}

/** What creating a token over the per-identity limit answers (unprocessable, 422). */
export function identityTokenLimitMessage(max: number): string {
  return (
    `the identity already has ${max} active tokens, the most an identity may have ` +
    '(ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT): revoke one, or let one expire, to create another'
  );
}

/**
 * CreateIdentityToken: a token (`rpi_`) acting as a bot of the project with the requested
 * scopes, each of which the caller holds (else 403) and the identity's role grants (else 403:
 * a token never holds more than its identity). Callers: a user session or an identity token.
 * An identity has at most `ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT` unrevoked, unexpired tokens
 * (counted with the identity locked); one more is unprocessable.
 */
export function createIdentityToken(deps: AdminDeps): Impl['createIdentityToken'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'identity_tokens:write');
    if (actor.kind === PrincipalKind.BOT) throw new AppError('forbidden', BOT_CALLER_MESSAGE);
    const bot = await requireIdentity(deps, actor, req.projectId, req.identityId);
    const scopes = valid(checkIdentityScopes(req.scopes));
    const now = deps.clock.now();
    const expiresAt = valid(
      checkIdentityExpiry(
        req.expiresAt ? timestampDate(req.expiresAt) : undefined,
        now,
        actor.identity?.expiresAt,
      ),
    );

    const held = permissionsOf(subjectOfActor(actor));
    const notHeld = scopes.find((s) => !held.has(s));
    if (notHeld) throw new AppError('forbidden', `the caller does not hold scope ${notHeld}`);
    const identity = permissionsOf({ kind: PrincipalKind.BOT, role: bot.role });
    const beyond = scopes.find((s) => !identity.has(s));
    if (beyond) {
      throw new AppError(
        'forbidden',
        PROJECT_PERMISSIONS.has(beyond)
          ? `the identity's role (${bot.role}) does not grant scope ${beyond}`
          : `scope ${beyond} is not available to identities (it needs a user session)`,
      );
    }

    const value = newToken('identity');
    const token = {
      id: newId('identityToken'),
      tenantId: bot.tenantId,
      projectId: bot.projectId,
      botId: bot.id,
      scopes,
      displayPrefix: value.slice(0, IDENTITY_TOKEN_DISPLAY_PREFIX_LENGTH),
      lastFour: value.slice(-4),
      createdByUserId: actor.session?.user.id ?? null,
      createdByTokenId: actor.identityTokenId ?? null,
      // A user session has a user; an identity token passes its own root user on.
      rootUserId: actor.session?.user.id ?? actor.identity?.rootUserId ?? '',
      // Likewise the session at the root: "sign out everywhere" keeps the tokens derived from the kept session.
      rootSessionId: actor.session?.id ?? actor.identity?.rootSessionId ?? null,
      createdAt: now,
      expiresAt,
      lastUsedAt: null,
      revokedAt: null,
    };
    const outcome = await deps.identityTokens.create({ ...token, tokenHash: hashToken(value) }, (trx) =>
      deps.audit.record(trx, {
        action: 'identity_token.create',
        tenantId: bot.tenantId,
        actor: auditActor(actor),
        target: { type: 'identity_token', id: token.id },
        details: {
          project_id: bot.projectId,
          identity_id: bot.id,
          scopes: [...scopes],
          expires_at: expiresAt.toISOString(),
          display_prefix: token.displayPrefix,
          last_four: token.lastFour,
        },
      }),
    );
    if (outcome === 'bot_not_found') throw new AppError('not_found', IDENTITY_NOT_FOUND_MESSAGE);
    if (outcome === 'limit_reached') {
      throw new AppError('unprocessable', identityTokenLimitMessage(deps.identityTokens.maxActivePerBot));
    }
    deps.logger.info(
      {
        identityTokenId: token.id,
        identityId: bot.id,
        projectId: bot.projectId,
        tenantId: bot.tenantId,
        scopes,
        by: actor.log,
      },
      'identity token created',
    );
    return { identityToken: identityTokenMessage(token), value };
  };
}

/** ListIdentityTokens: a page of the identity's tokens (never their values), newest first. */
export function listIdentityTokens(deps: AdminDeps): Impl['listIdentityTokens'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'identity_tokens:read');
    const paging = pageRequest(req);
    const bot = await requireIdentity(deps, actor, req.projectId, req.identityId);
    const page = await deps.identityTokens.list(bot.tenantId, bot.projectId, bot.id, paging);
    return { identityTokens: page.items.map(identityTokenMessage), nextCursor: nextCursor(page) };
  };
}

/** RevokeIdentityToken: idempotent; the token stops authenticating at once. */
export function revokeIdentityToken(deps: AdminDeps): Impl['revokeIdentityToken'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'identity_tokens:write');
    const bot = await requireIdentity(deps, actor, req.projectId, req.identityId);
    const token = isId('identityToken', req.tokenId)
      ? await deps.identityTokens.revoke(
          bot.tenantId,
          bot.projectId,
          bot.id,
          req.tokenId,
          deps.clock.now(),
          (trx, done) =>
            deps.audit.record(trx, {
              action: 'identity_token.revoke',
              tenantId: bot.tenantId,
              actor: auditActor(actor),
              target: { type: 'identity_token', id: done.token.id },
              details: {
                project_id: bot.projectId,
                identity_id: bot.id,
                already_revoked: done.alreadyRevoked,
              },
            }),
        )
      : undefined;
    if (!token) throw new AppError('not_found', IDENTITY_TOKEN_NOT_FOUND_MESSAGE);
    deps.logger.info(
      {
        identityTokenId: token.id,
        identityId: bot.id,
        projectId: bot.projectId,
        tenantId: bot.tenantId,
        by: actor.log,
      },
      'identity token revoked',
    );
    return { identityToken: identityTokenMessage(token) };
  };
}
