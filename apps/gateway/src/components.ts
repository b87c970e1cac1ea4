/**
 * The JSON Schemas of the API that more than one operation uses: each is registered with `$id`
 * and appears in the OpenAPI document under components/schemas (and so in the CLI's generated
 * types); routes refer to it as `ref('Name')`.
 */
import {
  BOT_ROLE_NAMES,
  KEY_MODE_NAMES,
  PLAN_IDS,
  PROJECT_ENVIRONMENTS,
  ROLE_NAMES,
} from '@relayplane/contract/contract';
import { PERMISSIONS } from '@relayplane/shared/iam';
import { object, ref } from './schemas.ts';

const dateTime = { type: 'string', format: 'date-time' } as const;
const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;

/** The scopes of an identity token: IAM permissions. */
export const PERMISSION_LIST = {
  type: 'array',
  items: { type: 'string', enum: [...PERMISSIONS] },
  description: 'Permissions (docs/iam.md).',
} as const;

export const SHARED_SCHEMAS = [
  {
    $id: 'Error',
    description: 'Every error response. `error` is a message that is safe to show.',
    ...object({ error: { type: 'string' } }),
  },
  {
    $id: 'MfaChallenge',
    description:
      'The one error body with more than `error`: the password step of a user with a second factor ' +
      '(`POST /admin/v1/auth/login`, 401). `mfa_token` is for `POST /admin/v1/auth/login/mfa`: single use, 5 minutes.',
    ...object(
      {
        error: { type: 'string' },
        mfa_required: { type: 'boolean', const: true },
        mfa_token: { type: 'string', pattern: '^rpm_[0-9a-f]{72}$' },
      },
      ['mfa_required', 'mfa_token'],
    ),
  },
  {
    $id: 'Project',
    ...object({
      id: { type: 'string', pattern: '^prj_[0-9a-z]{20}$' },
      name: { type: 'string' },
      tenant_id: { type: 'string' },
      environment: { type: 'string', enum: PROJECT_ENVIRONMENTS },
      created_at: dateTime,
    }),
  },
  {
    $id: 'User',
    ...object({
      id: { type: 'string' },
      email: { type: 'string' },
      platform_admin: { type: 'boolean' },
      created_at: dateTime,
    }),
  },
  {
    $id: 'Tenant',
    ...object({ id: { type: 'string' }, name: { type: 'string' }, created_at: dateTime }),
  },
  {
    $id: 'Session',
    ...object(
      {
        id: { type: 'string' },
        user: ref('User'),
        tenant: ref('Tenant'),
        role: { type: 'string', enum: ROLE_NAMES },
        created_at: dateTime,
        expires_at: dateTime,
        kind: {
          type: 'string',
          enum: ['session', 'cli'],
          description: '`session`: a login (`rpu_…`); `cli`: a CLI token from the device flow (`rpc_…`).',
        },
        permissions: {
          type: 'array',
          items: { type: 'string' },
          description: 'What the role grants in the active tenant (docs/iam.md).',
        },
        authenticated_by: {
          type: 'string',
          enum: ['bearer', 'cookie'],
          description:
            'How this request was authenticated: the `Authorization` header or the session cookie.',
        },
        csrf_token: {
          type: 'string',
          description:
            'Only when the session cookie authenticated the request: the token to send as `X-CSRF-Token` ' +
            'on every POST, PUT, PATCH and DELETE (a page reloaded after login gets it here again).',
        },
      },
      ['csrf_token'],
    ),
  },
  {
    $id: 'PlanLimits',
    ...object({
      max_concurrent_connections: { type: 'integer', description: 'Live relay credentials per tenant.' },
      max_api_keys: { type: 'integer' },
      max_projects: { type: 'integer' },
      max_bots: { type: 'integer' },
      max_allowlist_entries: { type: 'integer' },
      max_credential_ttl_seconds: { type: 'integer' },
      max_issuance_per_second_per_key: {
        type: 'integer',
        description: 'Credential requests per second per API key, refused ones included; beyond it 429.',
      },
    }),
  },
  {
    $id: 'Price',
    ...object({
      currency: { type: 'string', description: 'ISO 4217 code, lowercase.' },
      monthly_amount_minor: { type: 'integer', description: 'Monthly price in minor units (cents).' },
      contact_sales: { type: 'boolean', description: 'The price is negotiated, not listed.' },
    }),
  },
  {
    $id: 'Plan',
    ...object({
      id: { type: 'string', enum: PLAN_IDS },
      name: { type: 'string' },
      limits: ref('PlanLimits'),
      price: ref('Price'),
    }),
  },
  {
    $id: 'Jwk',
    ...object({
      kty: { type: 'string', const: 'OKP' },
      crv: { type: 'string', const: 'Ed25519' },
      x: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
      kid: { type: 'string', description: 'RFC 7638 JWK thumbprint.' },
      alg: { type: 'string', const: 'EdDSA' },
      use: { type: 'string', const: 'sig' },
    }),
  },
  {
    $id: 'SigningKey',
    ...object(
      {
        kid: { type: 'string' },
        state: { type: 'string', enum: ['next', 'active', 'previous', 'removed'] },
        created_at: {
          ...dateTime,
          description: 'When the key was created and published in the JWKS (unless removed).',
        },
        eligible_at: { ...dateTime, description: 'Next key: earliest time it may start signing.' },
        activated_at: { ...dateTime, description: 'When the key started signing.' },
        deactivated_at: { ...dateTime, description: 'When the key stopped signing.' },
        remove_after: {
          ...dateTime,
          description:
            'Previous key: leaves the JWKS after this, when every credential it signed has expired.',
        },
        removed_at: {
          ...dateTime,
          description: 'When the key left the JWKS and its private half was destroyed.',
        },
      },
      ['eligible_at', 'activated_at', 'deactivated_at', 'remove_after', 'removed_at'],
    ),
  },
  {
    $id: 'ApiKey',
    ...object({
      id: { type: 'string' },
      project_id: { type: 'string' },
      name: { type: 'string' },
      mode: { type: 'string', enum: KEY_MODE_NAMES },
      display_prefix: {
        type: 'string',
        description: 'The first characters of the key, e.g. `svc_live_1a2b`.',
      },
      last_four: { type: 'string' },
      scopes: { type: 'array', items: { type: 'string' } },
      created_at: dateTime,
      last_used_at: { ...nullableDateTime, description: 'Accurate to about a minute.' },
      revoked_at: nullableDateTime,
    }),
  },
  {
    $id: 'AllowlistEntry',
    ...object({
      id: { type: 'string' },
      project_id: { type: 'string' },
      cidr: { type: 'string', description: 'Normalised network, e.g. `10.1.0.0/16` or `2001:db8::/32`.' },
      created_at: dateTime,
    }),
  },
  {
    $id: 'Relay',
    ...object({
      id: { type: 'string' },
      region: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'integer' },
      url: { type: 'string', description: '`https://host:port`' },
      status: { type: 'string', enum: ['healthy'], description: 'Only healthy relays are handed out.' },
    }),
  },
  {
    $id: 'RegisteredRelay',
    ...object({
      id: { type: 'string' },
      region: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'integer' },
      url: { type: 'string' },
      status: { type: 'string', enum: ['healthy', 'unhealthy'] },
      load: { type: 'number', minimum: 0, maximum: 1 },
      static: {
        type: 'boolean',
        description: 'Declared in RELAYPLANE_RELAYS_FILE: always healthy, not removable here.',
      },
      last_heartbeat_at: nullableDateTime,
      created_at: nullableDateTime,
    }),
  },
  {
    $id: 'RelayCredential',
    ...object({
      token: {
        type: 'string',
        description: 'Short-lived Ed25519 JWT (see docs/credentials.md for the claims).',
      },
      expires_at: { ...dateTime, description: 'Equals the `exp` claim.' },
      jti: { type: 'string', description: 'Credential id; used to revoke it.' },
      relays: {
        type: 'array',
        items: ref('Relay'),
        description: 'Healthy relays, requested region first, then least loaded. Empty when none is healthy.',
      },
      fallback: {
        type: 'array',
        items: { type: 'string' },
        description: '`host:port` entry points: configured ones, then healthy relays of other regions.',
      },
    }),
  },
  {
    $id: 'Bot',
    ...object({
      id: { type: 'string', pattern: '^bot_[0-9a-z]{20}$' },
      project_id: { type: 'string' },
      name: { type: 'string' },
      role: { type: 'string', enum: BOT_ROLE_NAMES, description: 'Project-scoped.' },
      created_at: dateTime,
    }),
  },
  {
    $id: 'BotKey',
    ...object({
      id: { type: 'string' },
      bot_id: { type: 'string' },
      display_prefix: { type: 'string', description: 'The first characters of the token, e.g. `rpb_1a2b`.' },
      last_four: { type: 'string' },
      created_at: dateTime,
      last_used_at: { ...nullableDateTime, description: 'Accurate to about a minute.' },
      revoked_at: nullableDateTime,
    }),
  },
  {
    $id: 'IdentityToken',
    ...object({
      id: { type: 'string' },
      identity_id: { type: 'string', description: 'The bot the token acts as.' },
      project_id: { type: 'string' },
      scopes: PERMISSION_LIST,
      display_prefix: { type: 'string', description: 'The first 8 characters, `rpi_` + 4.' },
      last_four: { type: 'string' },
      created_at: dateTime,
      expires_at: dateTime,
      last_used_at: nullableDateTime,
      revoked_at: nullableDateTime,
    }),
  },
  {
    // What `GET /admin/v1/auth/session` answers for a bot token or an identity token.
    $id: 'BotSession',
    ...object(
      {
        authenticated_by: {
          type: 'string',
          enum: ['bot_token', 'identity_token'],
          description:
            'How this request was authenticated: a bot token, or an identity token acting as `bot`.',
        },
        tenant_id: { type: 'string' },
        project_id: { type: 'string', description: 'The bot acts within this project only.' },
        role: { type: 'string', enum: BOT_ROLE_NAMES },
        permissions: {
          type: 'array',
          items: { type: 'string' },
          description:
            "What this principal holds (docs/iam.md): the bot's role within its project, and for an " +
            "identity token only the token's scopes among those.",
        },
        bot: ref('Bot'),
        identity_token: ref('IdentityToken'),
      },
      ['identity_token'],
    ),
  },
  {
    $id: 'Member',
    ...object({
      user: ref('User'),
      tenant_id: { type: 'string' },
      role: { type: 'string', enum: ROLE_NAMES },
      created_at: { ...dateTime, description: 'When the user joined the tenant.' },
    }),
  },
  {
    $id: 'Subscription',
    ...object({
      tenant_id: { type: 'string' },
      plan: ref('Plan'),
      updated_at: {
        ...nullableDateTime,
        description: 'When the plan last changed; null while the tenant is on the default plan.',
      },
    }),
  },
  {
    $id: 'CheckoutSession',
    ...object({
      id: { type: 'string' },
      plan: { type: 'string', enum: PLAN_IDS },
      provider: { type: 'string', enum: ['builtin', 'stripe'] },
      status: { type: 'string', enum: ['open', 'completed', 'expired'] },
      url: { type: 'string', description: 'Where the user confirms (built-in) or pays (Stripe).' },
      created_at: dateTime,
      expires_at: dateTime,
    }),
  },
] as const;
