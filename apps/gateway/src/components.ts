/**
 * The JSON Schemas of the API that more than one operation uses: each is registered with `$id`
 * and appears in the OpenAPI document under components/schemas (and so in the CLI's generated
 * types); routes refer to it as `ref(Name)`, which also gives the route its type.
 */
import {
  BOT_ROLE_NAMES,
  KEY_MODE_NAMES,
  PLAN_IDS,
  PROJECT_ENVIRONMENTS,
  ROLE_NAMES,
} from '@relayplane/contract/contract';
import { MAX_PATH_LENGTH, MAX_PATH_PATTERNS } from '@relayplane/contract/credential-paths';
import { PERMISSIONS } from '@relayplane/shared/iam';
import { dateTime, nullable, nullableDateTime, object, oneOf, ref, Type } from './schemas.ts';
import { WEBHOOK_SCHEMAS } from './webhook-components.ts';

/** The scopes of an identity token: IAM permissions. */
export const PERMISSION_LIST = Type.Array(oneOf([...PERMISSIONS]), {
  description: 'Permissions (docs/iam.md).',
});

export const ErrorSchema = object(
  { error: Type.String() },
  { $id: 'Error', description: 'Every error response. `error` is a message that is safe to show.' },
);

export const MfaChallenge = object(
  {
    error: Type.String(),
    mfa_required: Type.Optional(Type.Literal(true)),
    mfa_token: Type.Optional(Type.String({ pattern: '^rpm_[0-9a-f]{72}$' })),
  },
  {
    $id: 'MfaChallenge',
    description:
      'The one error body with more than `error`: the password step of a user with a second factor ' +
      '(`POST /admin/v1/auth/login`, 401). `mfa_token` is for `POST /admin/v1/auth/login/mfa`: single use, 5 minutes.',
  },
);

export const Project = object(
  {
    id: Type.String({ pattern: '^prj_[0-9a-z]{20}$' }),
    name: Type.String(),
    tenant_id: Type.String(),
    environment: oneOf(PROJECT_ENVIRONMENTS),
    created_at: dateTime(),
  },
  { $id: 'Project' },
);

export const User = object(
  { id: Type.String(), email: Type.String(), platform_admin: Type.Boolean(), created_at: dateTime() },
  { $id: 'User' },
);

export const Tenant = object(
  { id: Type.String(), name: Type.String(), created_at: dateTime() },
  { $id: 'Tenant' },
);

export const Session = object(
  {
    id: Type.String(),
    user: ref(User),
    tenant: ref(Tenant),
    role: oneOf(ROLE_NAMES),
    created_at: dateTime(),
    expires_at: dateTime(),
    kind: oneOf(['session', 'cli'], {
      description: '`session`: a login (`rpu_…`); `cli`: a CLI token from the device flow (`rpc_…`).',
    }),
    permissions: Type.Array(Type.String(), {
      description: 'What the role grants in the active tenant (docs/iam.md).',
    }),
    authenticated_by: oneOf(['bearer', 'cookie'], {
      description: 'How this request was authenticated: the `Authorization` header or the session cookie.',
    }),
    csrf_token: Type.Optional(
      Type.String({
        description:
          'Only when the session cookie authenticated the request: the token to send as `X-CSRF-Token` ' +
          'on every POST, PUT, PATCH and DELETE (a page reloaded after login gets it here again).',
      }),
    ),
  },
  { $id: 'Session' },
);

export const PlanLimits = object(
  {
    max_concurrent_connections: Type.Integer({ description: 'Live relay credentials per tenant.' }),
    max_api_keys: Type.Integer(),
    max_projects: Type.Integer(),
    max_bots: Type.Integer(),
    max_allowlist_entries: Type.Integer(),
    max_credential_ttl_seconds: Type.Integer(),
    max_issuance_per_second_per_key: Type.Integer({
      description: 'Credential requests per second per API key, refused ones included; beyond it 429.',
    }),
    max_webhook_endpoints: Type.Integer({ description: 'Webhook endpoints per project.' }),
  },
  { $id: 'PlanLimits' },
);

export const Price = object(
  {
    currency: Type.String({ description: 'ISO 4217 code, lowercase.' }),
    monthly_amount_minor: Type.Integer({ description: 'Monthly price in minor units (cents).' }),
    contact_sales: Type.Boolean({ description: 'The price is negotiated, not listed.' }),
  },
  { $id: 'Price' },
);

export const Plan = object(
  { id: oneOf(PLAN_IDS), name: Type.String(), limits: ref(PlanLimits), price: ref(Price) },
  { $id: 'Plan' },
);

export const Jwk = object(
  {
    kty: Type.Literal('OKP'),
    crv: Type.Literal('Ed25519'),
    x: Type.String({ pattern: '^[A-Za-z0-9_-]{43}$' }),
    kid: Type.String({ description: 'RFC 7638 JWK thumbprint.' }),
    alg: Type.Literal('EdDSA'),
    use: Type.Literal('sig'),
  },
  { $id: 'Jwk' },
);

export const SigningKey = object(
  {
    kid: Type.String(),
    state: oneOf(['next', 'active', 'previous', 'removed']),
    created_at: dateTime({
      description: 'When the key was created and published in the JWKS (unless removed).',
    }),
    eligible_at: Type.Optional(dateTime({ description: 'Next key: earliest time it may start signing.' })),
    activated_at: Type.Optional(dateTime({ description: 'When the key started signing.' })),
    deactivated_at: Type.Optional(dateTime({ description: 'When the key stopped signing.' })),
    remove_after: Type.Optional(
      dateTime({
        description: 'Previous key: leaves the JWKS after this, when every credential it signed has expired.',
      }),
    ),
    removed_at: Type.Optional(
      dateTime({ description: 'When the key left the JWKS and its private half was destroyed.' }),
    ),
  },
  { $id: 'SigningKey' },
);

/** A request's root: a path relative to the project (slashes normalised; no wildcards). */
export const PATH_ROOT = Type.String({
  maxLength: MAX_PATH_LENGTH,
  description:
    'A path relative to the project (`room/42`); slashes are normalised, `""` is the whole project.',
});

/** A request's patterns of one role (moq's pattern syntax). */
export const PATTERN_LIST = Type.Array(Type.String({ maxLength: 256 }), {
  maxItems: MAX_PATH_PATTERNS,
  description:
    'moq patterns relative to `root`: `/`-separated segments, `*` one segment, `pre*suf` one segment by its ends, ' +
    '`**` any run of segments (once); `room` is one broadcast, `room/**` it and everything beneath, `**` everything.',
});

/** An API key's ceiling as answered: the paths every credential of the key is bounded by. */
export const PathCeilingOut = object(
  {
    root: Type.String({ description: 'A path relative to the project; `""` is its whole namespace.' }),
    publish: Type.Array(Type.String(), {
      description: 'moq patterns relative to `root`; empty: no publishing.',
    }),
    subscribe: Type.Array(Type.String(), {
      description: 'moq patterns relative to `root`; empty: no subscribing.',
    }),
  },
  {
    description:
      'Every credential the key mints is bounded by it: a request within it is issued as asked, one without paths ' +
      "gets the ceiling, one beyond it is refused (403). Fixed at the key's creation (docs/credentials.md, " +
      '"Path-scoped credentials").',
  },
);

export const ApiKey = object(
  {
    id: Type.String(),
    project_id: Type.String(),
    name: Type.String(),
    mode: oneOf(KEY_MODE_NAMES),
    display_prefix: Type.String({ description: 'The first characters of the key, e.g. `svc_live_1a2b`.' }),
    last_four: Type.String(),
    scopes: Type.Array(Type.String()),
    ceiling: nullable(PathCeilingOut),
    created_at: dateTime(),
    last_used_at: nullableDateTime({ description: 'Accurate to about a minute.' }),
    revoked_at: nullableDateTime(),
  },
  { $id: 'ApiKey' },
);

export const AllowlistEntry = object(
  {
    id: Type.String(),
    project_id: Type.String(),
    cidr: Type.String({ description: 'Normalised network, e.g. `10.1.0.0/16` or `2001:db8::/32`.' }),
    created_at: dateTime(),
  },
  { $id: 'AllowlistEntry' },
);

export const Relay = object(
  {
    id: Type.String(),
    region: Type.String(),
    host: Type.String(),
    port: Type.Integer(),
    url: Type.String({ description: '`https://host:port`' }),
    status: oneOf(['healthy'], { description: 'Only healthy relays are handed out.' }),
  },
  { $id: 'Relay' },
);

export const RegisteredRelay = object(
  {
    id: Type.String(),
    region: Type.String(),
    host: Type.String(),
    port: Type.Integer(),
    url: Type.String(),
    status: oneOf(['healthy', 'unhealthy']),
    load: Type.Number({ minimum: 0, maximum: 1 }),
    static: Type.Boolean({
      description: 'Declared in RELAYPLANE_RELAYS_FILE: always healthy, not removable here.',
    }),
    last_heartbeat_at: nullableDateTime(),
    created_at: nullableDateTime(),
    client_certificate_sha256: nullable(
      Type.String({
        description: 'SHA-256 (hex) of the client certificate the relay may authenticate with.',
      }),
    ),
  },
  { $id: 'RegisteredRelay' },
);

export const RelayCredential = object(
  {
    token: Type.String({ description: 'Short-lived Ed25519 JWT (see docs/credentials.md for the claims).' }),
    expires_at: dateTime({ description: 'Equals the `exp` claim.' }),
    jti: Type.String({ description: 'Credential id; used to revoke it.' }),
    relays: Type.Array(ref(Relay), {
      description: 'Healthy relays, requested region first, then least loaded. Empty when none is healthy.',
    }),
    fallback: Type.Array(Type.String(), {
      description: '`host:port` entry points: configured ones, then healthy relays of other regions.',
    }),
  },
  { $id: 'RelayCredential' },
);

export const Bot = object(
  {
    id: Type.String({ pattern: '^bot_[0-9a-z]{20}$' }),
    project_id: Type.String(),
    name: Type.String(),
    role: oneOf(BOT_ROLE_NAMES, { description: 'Project-scoped.' }),
    created_at: dateTime(),
  },
  { $id: 'Bot' },
);

export const BotKey = object(
  {
    id: Type.String(),
    bot_id: Type.String(),
    display_prefix: Type.String({ description: 'The first characters of the token, e.g. `rpb_1a2b`.' }),
    last_four: Type.String(),
    created_at: dateTime(),
    last_used_at: nullableDateTime({ description: 'Accurate to about a minute.' }),
    revoked_at: nullableDateTime(),
  },
  { $id: 'BotKey' },
);

export const IdentityToken = object(
  {
    id: Type.String(),
    identity_id: Type.String({ description: 'The bot the token acts as.' }),
    project_id: Type.String(),
    scopes: PERMISSION_LIST,
    display_prefix: Type.String({ description: 'The first 8 characters, `rpi_` + 4.' }),
    last_four: Type.String(),
    created_at: dateTime(),
    expires_at: dateTime(),
    last_used_at: nullableDateTime(),
    revoked_at: nullableDateTime(),
  },
  { $id: 'IdentityToken' },
);

/** What `GET /admin/v1/auth/session` answers for a bot token or an identity token. */

export const BotSession = object(
  {
    authenticated_by: oneOf(['bot_token', 'identity_token'], {
      description: 'How this request was authenticated: a bot token, or an identity token acting as `bot`.',
    }),
    tenant_id: Type.String(),
    project_id: Type.String({ description: 'The bot acts within this project only.' }),
    role: oneOf(BOT_ROLE_NAMES),
    permissions: Type.Array(Type.String(), {
      description:
        "What this principal holds (docs/iam.md): the bot's role within its project, and for an " +
        "identity token only the token's scopes among those.",
    }),
    bot: ref(Bot),
    identity_token: Type.Optional(ref(IdentityToken)),
  },
  { $id: 'BotSession' },
);

export const Member = object(
  {
    user: ref(User),
    tenant_id: Type.String(),
    role: oneOf(ROLE_NAMES),
    created_at: dateTime({ description: 'When the user joined the tenant.' }),
  },
  { $id: 'Member' },
);

export const Subscription = object(
  {
    tenant_id: Type.String(),
    plan: ref(Plan),
    updated_at: nullableDateTime({
      description: 'When the plan last changed; null while the tenant is on the default plan.',
    }),
  },
  { $id: 'Subscription' },
);

export const CheckoutSession = object(
  {
    id: Type.String(),
    plan: oneOf(PLAN_IDS),
    provider: oneOf(['builtin', 'stripe']),
    status: oneOf(['open', 'completed', 'expired']),
    url: Type.String({ description: 'Where the user confirms (built-in) or pays (Stripe).' }),
    created_at: dateTime(),
    expires_at: dateTime(),
  },
  { $id: 'CheckoutSession' },
);

/** Registered with `app.addSchema`, in this order (a schema refers only to those before it). */
export const SHARED_SCHEMAS = [
  ErrorSchema,
  MfaChallenge,
  Project,
  User,
  Tenant,
  Session,
  PlanLimits,
  Price,
  Plan,
  Jwk,
  SigningKey,
  ApiKey,
  AllowlistEntry,
  Relay,
  RegisteredRelay,
  RelayCredential,
  Bot,
  BotKey,
  IdentityToken,
  BotSession,
  Member,
  Subscription,
  CheckoutSession,
  ...WEBHOOK_SCHEMAS,
] as const;
