/**
 * Protobuf messages → the public JSON shapes (snake_case, ISO 8601 times), one presenter per
 * shape, typed by that shape's schema (components.ts, or the route's own): a field the schema
 * adds and the presenter does not fill is a compile error. A field a service must always answer and did not is an
 * internal error (`required`), never a silently missing field.
 */
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import {
  type BotRoleName,
  isBotRoleName,
  KEY_MODE_NAMES,
  PLAN_IDS,
  PROJECT_ENVIRONMENTS,
} from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import {
  type AllowlistEntry,
  type ApiKey,
  type Bot,
  type BotKey,
  type IdentityToken,
  type Member,
  type Principal,
  PrincipalKind,
  type Project,
  type Session,
  type Tenant,
  type User,
} from '@relayplane/proto/admin';
import type { CheckoutSession, Plan, UsageDay } from '@relayplane/proto/billing';
import {
  type IntrospectCredentialResponse,
  KeyState,
  type Relay,
  type Revocation,
  type SigningKey,
} from '@relayplane/proto/issuer';
import { PERMISSIONS, permissionsOf, roleName, subjectOf } from '@relayplane/shared/iam';
import type { FastifyRequest } from 'fastify';
import type {
  AllowlistEntry as AllowlistEntrySchema,
  ApiKey as ApiKeySchema,
  BotKey as BotKeySchema,
  Bot as BotSchema,
  BotSession as BotSessionSchema,
  CheckoutSession as CheckoutSessionSchema,
  IdentityToken as IdentityTokenSchema,
  Member as MemberSchema,
  Plan as PlanSchema,
  Project as ProjectSchema,
  RegisteredRelay as RegisteredRelaySchema,
  Relay as RelaySchema,
  Session as SessionSchema,
  SigningKey as SigningKeySchema,
  Tenant as TenantSchema,
  User as UserSchema,
} from './components.ts';
import { csrfTokenFor, sessionCookieOf } from './plugins/csrf.ts';
import type { Static } from './schemas.ts';

export function iso(ts: Timestamp | undefined): string | undefined {
  return ts ? timestampDate(ts).toISOString() : undefined;
}

/** RFC 3339 with a time zone (Date.parse alone would take `2026-01-01` or `Jan 1 2026`). */
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * The instant (Unix ms) of an RFC 3339 date-time with a zone, or undefined when `text` is not
 * one or names an impossible date or time (2026-02-31, 24:00, a zone offset past 23:59): each
 * field must be in range, not rolled over into the next month as `Date` would. Fractions beyond
 * milliseconds are cut off; a leap second (:60) is refused.
 */
export function parseRfc3339(text: string): number | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const date = new Date(0);
  // setUTCFullYear: years 0–99 stay themselves (Date.UTC would read them as 1900–1999).
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, Number((m[7] ?? '').slice(0, 3).padEnd(3, '0')));
  if (
    date.getUTCFullYear() !== year ||
    date.getUTCMonth() !== month - 1 ||
    date.getUTCDate() !== day ||
    date.getUTCHours() !== hour ||
    date.getUTCMinutes() !== minute ||
    date.getUTCSeconds() !== second
  ) {
    return undefined;
  }
  if (m[8] === undefined) return date.getTime();
  const offsetHours = Number(m[9]);
  const offsetMinutes = Number(m[10]);
  if (offsetHours > 23 || offsetMinutes > 59) return undefined;
  return date.getTime() - (m[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
}

let lastSecond = Number.NaN;
let lastSecondText = '';

/**
 * `iso` for the hot path's whole-second times (a credential's expiry), remembering the last
 * one: credentials issued in the same second with the same ttl share the text.
 */
export function isoSecond(ts: Timestamp | undefined): string | undefined {
  if (ts === undefined) return undefined;
  if (ts.nanos !== 0) return iso(ts);
  const seconds = Number(ts.seconds);
  if (seconds !== lastSecond) {
    lastSecondText = new Date(seconds * 1000).toISOString();
    lastSecond = seconds;
  }
  return lastSecondText;
}

/** `value`, which a service must answer: when it did not, an internal error naming `what`. */
export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new AppError('internal', `${what} missing from a service response`);
  return value;
}

/** `value`, which the schema declares as one of `values`: anything else a service answers is an internal error. */
export function oneOfValues<const V extends readonly string[]>(
  values: V,
  value: string,
  what: string,
): V[number] {
  if (!values.includes(value))
    throw new AppError('internal', `${what} "${value}" is not one the API declares`);
  return value as V[number];
}

const KEY_STATES: Record<number, Static<typeof SigningKeySchema>['state']> = {
  [KeyState.NEXT]: 'next',
  [KeyState.ACTIVE]: 'active',
  [KeyState.PREVIOUS]: 'previous',
  [KeyState.REMOVED]: 'removed',
};

export function presentProject(p: Project): Static<typeof ProjectSchema> {
  return {
    id: p.id,
    name: p.name,
    tenant_id: p.tenantId,
    environment: oneOfValues(PROJECT_ENVIRONMENTS, p.environment, 'project.environment'),
    created_at: required(iso(p.createdAt), 'project.created_at'),
  };
}

export function presentUser(u: User): Static<typeof UserSchema> {
  return {
    id: u.id,
    email: u.email,
    platform_admin: u.platformAdmin,
    created_at: required(iso(u.createdAt), 'user.created_at'),
  };
}

export function presentTenant(t: Tenant): Static<typeof TenantSchema> {
  return { id: t.id, name: t.name, created_at: required(iso(t.createdAt), 'tenant.created_at') };
}

export function presentSession(s: Session): Static<typeof SessionSchema> {
  const role = roleName(s.role);
  return {
    id: s.id,
    user: presentUser(required(s.user, 'session.user')),
    tenant: presentTenant(required(s.tenant, 'session.tenant')),
    role: required(role, 'session.role'),
    created_at: required(iso(s.createdAt), 'session.created_at'),
    expires_at: required(iso(s.expiresAt), 'session.expires_at'),
    kind: s.kind === 'cli' ? ('cli' as const) : ('session' as const),
    authenticated_by: 'bearer' as const,
    permissions: [...permissionsOf({ kind: PrincipalKind.USER_SESSION, role })],
  };
}

/**
 * The caller's own session: authenticated by the session cookie, it also carries the CSRF
 * token to send as `X-CSRF-Token` (a page reloaded after login learns it here).
 */
export function presentOwnSession(request: FastifyRequest, s: Session): Static<typeof SessionSchema> {
  if (request.auth?.via !== 'cookie') return presentSession(s);
  return {
    ...presentSession(s),
    authenticated_by: 'cookie' as const,
    csrf_token: csrfTokenFor(sessionCookieOf(request) ?? ''),
  };
}

export function presentMember(m: Member): Static<typeof MemberSchema> {
  return {
    user: presentUser(required(m.user, 'member.user')),
    tenant_id: m.tenantId,
    role: required(roleName(m.role), 'member.role'),
    created_at: required(iso(m.createdAt), 'member.created_at'),
  };
}

export function presentPlan(p: Plan): Static<typeof PlanSchema> {
  const limits = required(p.limits, 'plan.limits');
  const price = required(p.price, 'plan.price');
  return {
    id: oneOfValues(PLAN_IDS, p.id, 'plan.id'),
    name: p.name,
    limits: {
      max_concurrent_connections: limits.maxConcurrentConnections,
      max_api_keys: limits.maxApiKeys,
      max_projects: limits.maxProjects,
      max_bots: limits.maxBots,
      max_allowlist_entries: limits.maxAllowlistEntries,
      max_credential_ttl_seconds: limits.maxCredentialTtlSeconds,
      max_issuance_per_second_per_key: limits.maxIssuancePerSecondPerKey,
      max_webhook_endpoints: limits.maxWebhookEndpoints,
    },
    price: {
      currency: price.currency,
      monthly_amount_minor: price.monthlyAmountMinor,
      contact_sales: price.contactSales,
    },
  };
}

export function presentSigningKey(k: SigningKey): Static<typeof SigningKeySchema> {
  return {
    kid: k.kid,
    state: required(KEY_STATES[k.state], 'signing_key.state'),
    created_at: required(iso(k.createdAt), 'signing_key.created_at'),
    ...timeIfSet('eligible_at', k.eligibleAt),
    ...timeIfSet('activated_at', k.activatedAt),
    ...timeIfSet('deactivated_at', k.deactivatedAt),
    ...timeIfSet('remove_after', k.removeAfter),
    ...timeIfSet('removed_at', k.removedAt),
  };
}

/** `{[name]: <ISO time>}` when `ts` is set, else nothing: the schema's optional times are absent, never null. */
function timeIfSet<N extends string>(name: N, ts: Timestamp | undefined): { [K in N]?: string } {
  const value = iso(ts);
  return value === undefined ? {} : ({ [name]: value } as { [K in N]: string });
}

/** What is shown of a secret (API key, bot key, identity token): never the secret itself. */
function presentSecret(
  k: Pick<ApiKey, 'displayPrefix' | 'lastFour' | 'createdAt' | 'lastUsedAt' | 'revokedAt'>,
  what: string,
) {
  return {
    display_prefix: k.displayPrefix,
    last_four: k.lastFour,
    created_at: required(iso(k.createdAt), `${what}.created_at`),
    last_used_at: iso(k.lastUsedAt) ?? null,
    revoked_at: iso(k.revokedAt) ?? null,
  };
}

export function presentApiKey(k: ApiKey): Static<typeof ApiKeySchema> {
  return {
    id: k.id,
    project_id: k.projectId,
    name: k.name,
    mode: oneOfValues(KEY_MODE_NAMES, k.mode, 'api_key.mode'),
    scopes: k.scopes,
    ceiling: k.ceiling
      ? { root: k.ceiling.root, publish: k.ceiling.publish, subscribe: k.ceiling.subscribe }
      : null,
    ...presentSecret(k, 'api_key'),
  };
}

export function presentAllowlistEntry(e: AllowlistEntry): Static<typeof AllowlistEntrySchema> {
  return {
    id: e.id,
    project_id: e.projectId,
    cidr: e.cidr,
    created_at: required(iso(e.createdAt), 'allowlist_entry.created_at'),
  };
}

function botRole(b: Bot): BotRoleName {
  const role = roleName(b.role);
  return required(role !== undefined && isBotRoleName(role) ? role : undefined, 'bot.role');
}

export function presentBot(b: Bot): Static<typeof BotSchema> {
  return {
    id: b.id,
    project_id: b.projectId,
    name: b.name,
    role: botRole(b),
    created_at: required(iso(b.createdAt), 'bot.created_at'),
  };
}

export function presentBotKey(k: BotKey): Static<typeof BotKeySchema> {
  return { id: k.id, bot_id: k.botId, ...presentSecret(k, 'bot_key') };
}

export function presentIdentityToken(t: IdentityToken): Static<typeof IdentityTokenSchema> {
  return {
    id: t.id,
    identity_id: t.identityId,
    project_id: t.projectId,
    scopes: t.scopes.map((scope) => oneOfValues(PERMISSIONS, scope, 'identity_token.scopes')),
    expires_at: required(iso(t.expiresAt), 'identity_token.expires_at'),
    ...presentSecret(t, 'identity_token'),
  };
}

/** What GET /admin/v1/auth/session answers for a bot token or an identity token (its identity). */
export function presentBotSession(
  principal: Principal,
  b: Bot,
  identityToken: IdentityToken | undefined,
): Static<typeof BotSessionSchema> {
  const bot = presentBot(b);
  const base = {
    tenant_id: b.tenantId,
    project_id: bot.project_id,
    role: bot.role,
    permissions: [...permissionsOf(subjectOf(principal))],
    bot,
  };
  if (!identityToken) return { authenticated_by: 'bot_token' as const, ...base };
  return {
    authenticated_by: 'identity_token' as const,
    ...base,
    identity_token: presentIdentityToken(identityToken),
  };
}

/** A relay as handed to clients (the contract's Relay). */
export function presentRelay(r: Relay): Static<typeof RelaySchema> {
  return {
    id: r.id,
    region: r.region,
    host: r.host,
    port: r.port,
    url: r.url,
    status: oneOfValues(['healthy'], r.status, 'relay.status'),
  };
}

/** A relay as operators see it in the registry. */
export function presentRegisteredRelay(r: Relay): Static<typeof RegisteredRelaySchema> {
  return {
    id: r.id,
    region: r.region,
    host: r.host,
    port: r.port,
    url: r.url,
    status: oneOfValues(['healthy', 'unhealthy'], r.status, 'relay.status'),
    load: r.load,
    static: r.static,
    last_heartbeat_at: iso(r.lastHeartbeatAt) ?? null,
    created_at: iso(r.createdAt) ?? null,
    client_certificate_sha256: r.clientCertificateSha256 || null,
  };
}

export function presentRevocation(r: Revocation) {
  return {
    sequence: Number(r.sequence),
    jti: r.jti,
    revoked_at: required(iso(r.revokedAt), 'revocation.revoked_at'),
    expires_at: required(iso(r.expiresAt), 'revocation.expires_at'),
  };
}

/** RFC 7662: the claims of an active credential; exactly `{"active": false}` for any other. */
export function presentIntrospection(res: IntrospectCredentialResponse) {
  if (!res.active) return { active: false };
  return {
    active: true,
    scope: res.scopes.join(' '),
    client_id: res.clientId,
    token_type: 'Bearer',
    sub: res.sub,
    aud: res.aud,
    iss: res.iss,
    jti: res.jti,
    exp: Number(res.exp),
    iat: Number(res.iat),
    nbf: Number(res.nbf),
    tid: res.tenantId,
    pid: res.projectId,
    mode: res.mode,
  };
}

export function presentCheckoutSession(s: CheckoutSession): Static<typeof CheckoutSessionSchema> {
  return {
    id: s.id,
    plan: oneOfValues(PLAN_IDS, s.planId, 'checkout_session.plan'),
    provider: oneOfValues(['builtin', 'stripe'], s.provider, 'checkout_session.provider'),
    status: oneOfValues(['open', 'completed', 'expired'], s.status, 'checkout_session.status'),
    url: s.url,
    created_at: required(iso(s.createdAt), 'checkout_session.created_at'),
    expires_at: required(iso(s.expiresAt), 'checkout_session.expires_at'),
  };
}

export function presentUsageDay(d: UsageDay) {
  return {
    day: d.day,
    project_id: d.projectId || null,
    credentials_issued: Number(d.credentialsIssued),
    peak_concurrent_connections: d.peakConcurrentConnections,
    sessions_ended: Number(d.sessionsEnded),
    session_minutes: Math.round((d.sessionSeconds / 60) * 100) / 100,
    bytes_sent: Number(d.bytesSent),
    bytes_received: Number(d.bytesReceived),
  };
}
