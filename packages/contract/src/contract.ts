/**
 * Values that several apps (and the CLI) must agree on, written out once. Every other file
 * imports them from here: a bus channel, a role, a scope or a plan id spelled in two places is
 * two things that can drift apart. The public contract (spec, docs/iam.md, docs/credentials.md)
 * names the same values; tests hold those documents to these constants.
 *
 * No imports: the CLI and the embedded banner use this module too, and it must stay free of
 * the server stack.
 */

/**
 * Redis pub/sub channels between replicas (payloads in the publishers' modules). A channel name
 * is a wire contract between versions during a rolling upgrade: rename only with a release
 * that listens on both.
 */
export const BUS_CHANNELS = {
  /** admin → gateways: the SHA-256 of a revoked API key, dropped from verification caches. */
  apiKeysRevoked: 'api-keys.revoked',
  /** billing → gateways: a tenant's plan changed; cached entitlements are dropped. */
  plansChanged: 'plans.changed',
  /** issuer → issuers and gateways: a signing key was added, activated or retired. */
  signingKeysChanged: 'signing-keys.changed',
  /** issuer → issuers: a credential was revoked (payload jti and feed sequence); wakes long-polls. */
  credentialsRevoked: 'credentials.revoked',
  /** issuer → issuers: a relay was registered, removed or sent a heartbeat (payload its id). */
  relaysChanged: 'relays.changed',
} as const;
export type BusChannel = (typeof BUS_CHANNELS)[keyof typeof BUS_CHANNELS];

/**
 * The four services: the `service` of their logs, their PostgreSQL schema, the names the
 * gateway's health check reports, and each one's workload name.
 */
export const SERVICES = { gateway: 'gateway', admin: 'admin', billing: 'billing', issuer: 'issuer' } as const;
export type ServiceName = (typeof SERVICES)[keyof typeof SERVICES];

/** Tenant roles, most powerful first (docs/iam.md has the permission matrix). */
export const ROLES = {
  owner: 'owner',
  admin: 'admin',
  developer: 'developer',
  viewer: 'viewer',
} as const;
export type RoleName = (typeof ROLES)[keyof typeof ROLES];
export const ROLE_NAMES: readonly RoleName[] = [ROLES.owner, ROLES.admin, ROLES.developer, ROLES.viewer];

export function isRoleName(value: string): value is RoleName {
  return (ROLE_NAMES as readonly string[]).includes(value);
}

/** A bot's role is project-scoped and never more than developer; unspecified means developer. */
export const BOT_ROLE_NAMES = [ROLES.developer, ROLES.viewer] as const;
export type BotRoleName = (typeof BOT_ROLE_NAMES)[number];
export const DEFAULT_BOT_ROLE: BotRoleName = ROLES.developer;

export function isBotRoleName(value: string): value is BotRoleName {
  return (BOT_ROLE_NAMES as readonly string[]).includes(value);
}

/** What a relay credential (and the API key that asks for it) may be scoped to. */
export const SCOPES = {
  session: 'relay:session',
  publish: 'relay:publish',
  subscribe: 'relay:subscribe',
} as const;
export type CredentialScope = (typeof SCOPES)[keyof typeof SCOPES];
export const CREDENTIAL_SCOPES = [SCOPES.session, SCOPES.publish, SCOPES.subscribe] as const;
/** A credential request without `scopes`. */
export const DEFAULT_CREDENTIAL_SCOPES: readonly CredentialScope[] = [SCOPES.session];

export function isCredentialScope(value: string): value is CredentialScope {
  return (CREDENTIAL_SCOPES as readonly string[]).includes(value);
}

/**
 * An API key's mode, carried into the credentials it asks for (claim `mode`): test keys let a
 * customer's staging traffic be told apart from production.
 */
export const KEY_MODES = { live: 'live', test: 'test' } as const;
export type KeyMode = (typeof KEY_MODES)[keyof typeof KEY_MODES];
export const KEY_MODE_NAMES = [KEY_MODES.live, KEY_MODES.test] as const;
export const DEFAULT_KEY_MODE: KeyMode = KEY_MODES.live;

export function isKeyMode(value: string): value is KeyMode {
  return (KEY_MODE_NAMES as readonly string[]).includes(value);
}

/** A project's `environment`. */
export const PROJECT_ENVIRONMENTS = ['production', 'staging', 'development'] as const;
export type ProjectEnvironment = (typeof PROJECT_ENVIRONMENTS)[number];
export const DEFAULT_PROJECT_ENVIRONMENT: ProjectEnvironment = 'production';

export function isProjectEnvironment(value: string): value is ProjectEnvironment {
  return (PROJECT_ENVIRONMENTS as readonly string[]).includes(value);
}

/** Plan ids; the catalogue (limits, prices) is configuration (RELAYPLANE_PLANS_FILE). */
export const PLANS = { free: 'free', pro: 'pro', enterprise: 'enterprise' } as const;
export type PlanId = (typeof PLANS)[keyof typeof PLANS];
export const PLAN_IDS = [PLANS.free, PLANS.pro, PLANS.enterprise] as const;
/** A public sign-up's plan, and the plan of a tenant billing has no subscription for. */
export const DEFAULT_PLAN: PlanId = PLANS.free;

export function isPlanId(value: string): value is PlanId {
  return (PLAN_IDS as readonly string[]).includes(value);
}

/** `ttl_seconds` of a credential: the accepted range and the default (a plan may lower the max). */
export const CREDENTIAL_TTL_SECONDS = { min: 60, max: 3600, default: 600 } as const;

/** An `Idempotency-Key` header (checkout sessions): 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * The audit trail (docs/audit.md): every action an event may name, `<resource>.<verb>`. Admin
 * records its own; issuer and billing deliver theirs through their outboxes. docs/audit.md
 * lists each with its target type and details.
 */
export const AUDIT_ACTIONS = [
  // admin: accounts and sessions
  'tenant.create',
  'session.login',
  'session.login_failed',
  'session.logout',
  'session.revoke',
  'session.switch_tenant',
  'user.password_change',
  'user.mfa_enroll',
  'user.mfa_confirm',
  'user.mfa_recovery_codes',
  'user.mfa_disable',
  'user.mfa_failed',
  'tenant.settings_change',
  'member.add',
  'member.role_change',
  'member.remove',
  // admin: projects and their keys
  'project.create',
  'api_key.create',
  'api_key.revoke',
  'allowlist.create',
  'allowlist.delete',
  'bot.create',
  'bot_key.create',
  'bot_key.revoke',
  'identity_token.create',
  'identity_token.revoke',
  'device.approve',
  'device.deny',
  'device.token_issue',
  // admin: webhook endpoints (issue 34)
  'webhook_endpoint.create',
  'webhook_endpoint.update',
  'webhook_endpoint.delete',
  'webhook_endpoint.rotate_secret',
  'webhook_endpoint.disable',
  'webhook_delivery.redeliver',
  // admin: the trail itself
  'audit.prune',
  // issuer
  'credential.revoke',
  'credentials.bulk_revoke',
  'relay.register',
  'relay.delete',
  'signing_key.rotate',
  'signing_key.revoke',
  'relay_session.end',
  // billing
  'plan.change',
  'checkout.create',
  'checkout.confirm',
  'billing.webhook',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export function isAuditAction(value: string): value is AuditAction {
  return (AUDIT_ACTIONS as readonly string[]).includes(value);
}

/** `<resource>.<verb>`: what an action name looks like (events delivered by issuer and billing are checked against it). */
export const AUDIT_ACTION_PATTERN = /^[a-z][a-z_]{0,39}\.[a-z][a-z_]{0,39}$/;

export const AUDIT_OUTCOMES = ['success', 'failure', 'denied'] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

export const AUDIT_ACTOR_TYPES = ['user', 'bot', 'identity_token', 'cli', 'system', 'anonymous'] as const;
export type AuditActorType = (typeof AUDIT_ACTOR_TYPES)[number];

/** Services that deliver audit events to admin (`RecordAuditEvents`). */
export const AUDIT_SOURCES = [SERVICES.issuer, SERVICES.billing] as const;
export type AuditSource = (typeof AUDIT_SOURCES)[number];

/**
 * The actions each delivering service may record (issue 31): its own domain's, nothing else
 * (admin refuses the rest, whoever the peer claims to be).
 */
export const AUDIT_SOURCE_ACTIONS: Readonly<Record<AuditSource, readonly AuditAction[]>> = {
  issuer: [
    'credential.revoke',
    'credentials.bulk_revoke',
    'relay.register',
    'relay.delete',
    'signing_key.rotate',
    'signing_key.revoke',
    'relay_session.end',
  ],
  billing: ['plan.change', 'checkout.create', 'checkout.confirm', 'billing.webhook'],
};

/**
 * Notices: facts a service delivers through its audit outbox for webhooks only (issue 34), never
 * appended to the trail (a session starting is not an audit event). The action is the webhook
 * event type; the details are the event's data.
 */
export const NOTICE_SOURCE_TYPES: Readonly<Record<AuditSource, readonly string[]>> = {
  issuer: ['session.started', 'session.ended', 'session.refused', 'cap.reached'],
  billing: [],
};

/** How far a delivered event's `occurred_at` may be from admin's clock, either way (issue 31). */
export const AUDIT_DELIVERY_MAX_SKEW_SECONDS = 300;

/** `GET /admin/v1/audit-events`: the page size's default and maximum. */
export const AUDIT_LIST_LIMIT = { default: 50, max: 200 } as const;

/** `RELAYPLANE_AUDIT_RETENTION_DAYS`' default. */
export const DEFAULT_AUDIT_RETENTION_DAYS = 400;
