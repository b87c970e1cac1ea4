import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  type AllowlistEntrySchema,
  type ApiKeySchema,
  type BotKeySchema,
  type BotSchema,
  type IdentityTokenSchema,
  type MemberSchema,
  PrincipalKind,
  type PrincipalSchema,
  type ProjectSchema,
  type SessionSchema,
  type TenantSchema,
  type UserSchema,
} from '@relayplane/proto/admin';
import { tenantRole } from '@relayplane/shared/iam';
import type {
  AllowlistEntryRecord,
  ApiKeyRecord,
  BotKeyRecord,
  BotRecord,
  IdentityTokenRecord,
  MemberRecord,
  ProjectRecord,
  SessionRecord,
  TenantRecord,
  UserRecord,
} from '../stores/records.ts';

export function userMessage(user: UserRecord): MessageInitShape<typeof UserSchema> {
  return {
    id: user.id,
    email: user.email,
    platformAdmin: user.platformAdmin,
    createdAt: timestampFromDate(user.createdAt),
  };
}

export function tenantMessage(tenant: TenantRecord): MessageInitShape<typeof TenantSchema> {
  return { id: tenant.id, name: tenant.name, createdAt: timestampFromDate(tenant.createdAt) };
}

export function projectMessage(project: ProjectRecord): MessageInitShape<typeof ProjectSchema> {
  return {
    id: project.id,
    name: project.name,
    tenantId: project.tenantId,
    environment: project.environment,
    createdAt: timestampFromDate(project.createdAt),
  };
}

export function sessionMessage(session: SessionRecord): MessageInitShape<typeof SessionSchema> {
  return {
    id: session.id,
    user: userMessage(session.user),
    tenant: tenantMessage(session.tenant),
    role: tenantRole(session.role),
    createdAt: timestampFromDate(session.createdAt),
    expiresAt: timestampFromDate(session.expiresAt),
    kind: session.kind ?? 'session',
  };
}

export function principalMessage(session: SessionRecord): MessageInitShape<typeof PrincipalSchema> {
  return {
    kind: PrincipalKind.USER_SESSION,
    userId: session.user.id,
    tenantId: session.tenant.id,
    role: tenantRole(session.role),
    platformAdmin: session.user.platformAdmin,
    sessionId: session.id,
  };
}

export function apiKeyMessage(key: ApiKeyRecord): MessageInitShape<typeof ApiKeySchema> {
  return {
    id: key.id,
    projectId: key.projectId,
    tenantId: key.tenantId,
    name: key.name,
    mode: key.mode,
    displayPrefix: key.displayPrefix,
    lastFour: key.lastFour,
    scopes: key.scopes,
    ceiling: key.ceiling ?? undefined,
    createdAt: timestampFromDate(key.createdAt),
    lastUsedAt: key.lastUsedAt ? timestampFromDate(key.lastUsedAt) : undefined,
    revokedAt: key.revokedAt ? timestampFromDate(key.revokedAt) : undefined,
  };
}

export function allowlistEntryMessage(
  entry: AllowlistEntryRecord,
): MessageInitShape<typeof AllowlistEntrySchema> {
  return {
    id: entry.id,
    projectId: entry.projectId,
    cidr: entry.cidr,
    createdAt: timestampFromDate(entry.createdAt),
  };
}

export function botMessage(bot: BotRecord): MessageInitShape<typeof BotSchema> {
  return {
    id: bot.id,
    projectId: bot.projectId,
    tenantId: bot.tenantId,
    name: bot.name,
    role: tenantRole(bot.role),
    createdAt: timestampFromDate(bot.createdAt),
  };
}

export function botKeyMessage(key: BotKeyRecord): MessageInitShape<typeof BotKeySchema> {
  return {
    id: key.id,
    botId: key.botId,
    projectId: key.projectId,
    displayPrefix: key.displayPrefix,
    lastFour: key.lastFour,
    createdAt: timestampFromDate(key.createdAt),
    lastUsedAt: key.lastUsedAt ? timestampFromDate(key.lastUsedAt) : undefined,
    revokedAt: key.revokedAt ? timestampFromDate(key.revokedAt) : undefined,
  };
}

/** A bot token's principal: the bot, in its project and tenant, with its role; never a platform admin. */
export function botPrincipalMessage(bot: BotRecord): MessageInitShape<typeof PrincipalSchema> {
  return {
    kind: PrincipalKind.BOT,
    tenantId: bot.tenantId,
    projectId: bot.projectId,
    botId: bot.id,
    role: tenantRole(bot.role),
    platformAdmin: false,
  };
}

export function memberMessage(member: MemberRecord): MessageInitShape<typeof MemberSchema> {
  return {
    user: userMessage(member.user),
    tenantId: member.tenantId,
    role: tenantRole(member.role),
    createdAt: timestampFromDate(member.createdAt),
  };
}

export function identityTokenMessage(
  token: IdentityTokenRecord,
): MessageInitShape<typeof IdentityTokenSchema> {
  return {
    id: token.id,
    projectId: token.projectId,
    identityId: token.botId,
    scopes: token.scopes,
    displayPrefix: token.displayPrefix,
    lastFour: token.lastFour,
    createdAt: timestampFromDate(token.createdAt),
    expiresAt: timestampFromDate(token.expiresAt),
    lastUsedAt: token.lastUsedAt ? timestampFromDate(token.lastUsedAt) : undefined,
    revokedAt: token.revokedAt ? timestampFromDate(token.revokedAt) : undefined,
  };
}

/** An identity token acts as its bot, within the bot's project, holding the token's scopes. */
export function identityPrincipalMessage(
  token: IdentityTokenRecord,
  bot: BotRecord,
  scopes: readonly string[],
): MessageInitShape<typeof PrincipalSchema> {
  return {
    ...botPrincipalMessage(bot),
    kind: PrincipalKind.IDENTITY,
    identityTokenId: token.id,
    scopes: [...scopes],
  };
}
