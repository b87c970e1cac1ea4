/** Protobuf messages → the public JSON shapes (snake_case, ISO 8601 times). */
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import {
  type ApiKey,
  PrincipalKind,
  type Project,
  type Session,
  type Tenant,
  type User,
} from '@relayplane/proto/admin';
import type { Plan } from '@relayplane/proto/billing';
import { KeyState, type Relay, type SigningKey } from '@relayplane/proto/issuer';
import { AppError } from '@relayplane/shared/errors';
import { permissionsOf, roleName } from '@relayplane/shared/iam';

export function iso(ts: Timestamp | undefined): string | undefined {
  return ts ? timestampDate(ts).toISOString() : undefined;
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

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new AppError('internal', `${what} missing from a service response`);
  return value;
}

const KEY_STATES: Record<number, string> = {
  [KeyState.NEXT]: 'next',
  [KeyState.ACTIVE]: 'active',
  [KeyState.PREVIOUS]: 'previous',
  [KeyState.REMOVED]: 'removed',
};

export function presentProject(p: Project) {
  return {
    id: p.id,
    name: p.name,
    tenant_id: p.tenantId,
    environment: p.environment,
    created_at: required(iso(p.createdAt), 'project.created_at'),
  };
}

export function presentUser(u: User) {
  return {
    id: u.id,
    email: u.email,
    platform_admin: u.platformAdmin,
    created_at: required(iso(u.createdAt), 'user.created_at'),
  };
}

export function presentTenant(t: Tenant) {
  return { id: t.id, name: t.name, created_at: required(iso(t.createdAt), 'tenant.created_at') };
}

export function presentSession(s: Session) {
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

export function presentPlan(p: Plan) {
  const limits = required(p.limits, 'plan.limits');
  const price = required(p.price, 'plan.price');
  return {
    id: p.id,
    name: p.name,
    limits: {
      max_concurrent_connections: limits.maxConcurrentConnections,
      max_api_keys: limits.maxApiKeys,
      max_projects: limits.maxProjects,
      max_bots: limits.maxBots,
      max_allowlist_entries: limits.maxAllowlistEntries,
      max_credential_ttl_seconds: limits.maxCredentialTtlSeconds,
    },
    price: {
      currency: price.currency,
      monthly_amount_minor: price.monthlyAmountMinor,
      contact_sales: price.contactSales,
    },
  };
}

export function presentSigningKey(k: SigningKey) {
  const out: Record<string, string> = {
    kid: k.kid,
    state: required(KEY_STATES[k.state], 'signing_key.state'),
    created_at: required(iso(k.createdAt), 'signing_key.created_at'),
  };
  for (const [name, ts] of [
    ['eligible_at', k.eligibleAt],
    ['activated_at', k.activatedAt],
    ['deactivated_at', k.deactivatedAt],
    ['remove_after', k.removeAfter],
    ['removed_at', k.removedAt],
  ] as const) {
    const v = iso(ts);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

export function presentApiKey(k: ApiKey) {
  return {
    id: k.id,
    project_id: k.projectId,
    name: k.name,
    mode: k.mode,
    display_prefix: k.displayPrefix,
    last_four: k.lastFour,
    scopes: k.scopes,
    created_at: required(iso(k.createdAt), 'api_key.created_at'),
    last_used_at: iso(k.lastUsedAt) ?? null,
    revoked_at: iso(k.revokedAt) ?? null,
  };
}

/** A relay as handed to clients (the contract's Relay). */
export function presentRelay(r: Relay) {
  return { id: r.id, region: r.region, host: r.host, port: r.port, url: r.url, status: r.status };
}

/** A relay as operators see it in the registry. */
export function presentRegisteredRelay(r: Relay) {
  return {
    ...presentRelay(r),
    load: r.load,
    static: r.static,
    last_heartbeat_at: iso(r.lastHeartbeatAt) ?? null,
    created_at: iso(r.createdAt) ?? null,
  };
}
