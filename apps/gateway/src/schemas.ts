/**
 * JSON Schemas shared by routes. Each is registered with `$id` and appears in the OpenAPI
 * document under components/schemas; routes refer to them as `{ $ref: 'Name#' }`.
 */

import { PLAN_IDS, ROLE_NAMES } from '@relayplane/shared/contract';
import {
  type Permission,
  PROJECT_PERMISSIONS,
  ROLE_PERMISSIONS,
  type RoleName,
} from '@relayplane/shared/iam';
import type { FastifySchema } from 'fastify';

const dateTime = { type: 'string', format: 'date-time' } as const;
const ref = (id: string) => ({ $ref: `${id}#` }) as const;

export const SHARED_SCHEMAS = [
  {
    $id: 'Error',
    type: 'object',
    description: 'Every error response. `error` is a message that is safe to show.',
    required: ['error'],
    additionalProperties: false,
    properties: { error: { type: 'string' } },
  },
  {
    $id: 'Project',
    type: 'object',
    required: ['id', 'name', 'tenant_id', 'environment', 'created_at'],
    additionalProperties: false,
    properties: {
      id: { type: 'string', pattern: '^prj_[0-9a-z]{20}$' },
      name: { type: 'string' },
      tenant_id: { type: 'string' },
      environment: { type: 'string', enum: ['production', 'staging', 'development'] },
      created_at: dateTime,
    },
  },
  {
    $id: 'User',
    type: 'object',
    required: ['id', 'email', 'platform_admin', 'created_at'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      email: { type: 'string' },
      platform_admin: { type: 'boolean' },
      created_at: dateTime,
    },
  },
  {
    $id: 'Tenant',
    type: 'object',
    required: ['id', 'name', 'created_at'],
    additionalProperties: false,
    properties: { id: { type: 'string' }, name: { type: 'string' }, created_at: dateTime },
  },
  {
    $id: 'Session',
    type: 'object',
    required: [
      'id',
      'user',
      'tenant',
      'role',
      'created_at',
      'expires_at',
      'kind',
      'authenticated_by',
      'permissions',
    ],
    additionalProperties: false,
    properties: {
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
        description: 'How this request was authenticated: the `Authorization` header or the session cookie.',
      },
      csrf_token: {
        type: 'string',
        description:
          'Only when the session cookie authenticated the request: the token to send as `X-CSRF-Token` ' +
          'on every POST, PUT, PATCH and DELETE (a page reloaded after login gets it here again).',
      },
    },
  },
  {
    $id: 'PlanLimits',
    type: 'object',
    required: [
      'max_concurrent_connections',
      'max_api_keys',
      'max_projects',
      'max_bots',
      'max_allowlist_entries',
      'max_credential_ttl_seconds',
    ],
    additionalProperties: false,
    properties: {
      max_concurrent_connections: { type: 'integer', description: 'Live relay credentials per tenant.' },
      max_api_keys: { type: 'integer' },
      max_projects: { type: 'integer' },
      max_bots: { type: 'integer' },
      max_allowlist_entries: { type: 'integer' },
      max_credential_ttl_seconds: { type: 'integer' },
    },
  },
  {
    $id: 'Price',
    type: 'object',
    required: ['currency', 'monthly_amount_minor', 'contact_sales'],
    additionalProperties: false,
    properties: {
      currency: { type: 'string', description: 'ISO 4217 code, lowercase.' },
      monthly_amount_minor: { type: 'integer', description: 'Monthly price in minor units (cents).' },
      contact_sales: { type: 'boolean', description: 'The price is negotiated, not listed.' },
    },
  },
  {
    $id: 'Plan',
    type: 'object',
    required: ['id', 'name', 'limits', 'price'],
    additionalProperties: false,
    properties: {
      id: { type: 'string', enum: PLAN_IDS },
      name: { type: 'string' },
      limits: ref('PlanLimits'),
      price: ref('Price'),
    },
  },
  {
    $id: 'Jwk',
    type: 'object',
    required: ['kty', 'crv', 'x', 'kid', 'alg', 'use'],
    additionalProperties: false,
    properties: {
      kty: { type: 'string', const: 'OKP' },
      crv: { type: 'string', const: 'Ed25519' },
      x: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
      kid: { type: 'string', description: 'RFC 7638 JWK thumbprint.' },
      alg: { type: 'string', const: 'EdDSA' },
      use: { type: 'string', const: 'sig' },
    },
  },
  {
    $id: 'SigningKey',
    type: 'object',
    required: ['kid', 'state', 'created_at'],
    additionalProperties: false,
    properties: {
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
        description: 'Previous key: leaves the JWKS after this, when every credential it signed has expired.',
      },
      removed_at: {
        ...dateTime,
        description: 'When the key left the JWKS and its private half was destroyed.',
      },
    },
  },
  {
    $id: 'SigningKeyList',
    type: 'object',
    required: ['keys', 'rotation_pending_since'],
    additionalProperties: false,
    properties: {
      keys: { type: 'array', items: ref('SigningKey') },
      rotation_pending_since: {
        type: ['string', 'null'],
        format: 'date-time',
        description: 'Set while a requested rotation waits for the next key to become eligible.',
      },
    },
  },
  {
    $id: 'ApiKey',
    type: 'object',
    required: [
      'id',
      'project_id',
      'name',
      'mode',
      'display_prefix',
      'last_four',
      'scopes',
      'created_at',
      'last_used_at',
      'revoked_at',
    ],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      project_id: { type: 'string' },
      name: { type: 'string' },
      mode: { type: 'string', enum: ['live', 'test'] },
      display_prefix: {
        type: 'string',
        description: 'The first characters of the key, e.g. `svc_live_1a2b`.',
      },
      last_four: { type: 'string' },
      scopes: { type: 'array', items: { type: 'string' } },
      created_at: dateTime,
      last_used_at: {
        type: ['string', 'null'],
        format: 'date-time',
        description: 'Accurate to about a minute.',
      },
      revoked_at: { type: ['string', 'null'], format: 'date-time' },
    },
  },
  {
    $id: 'AllowlistEntry',
    type: 'object',
    required: ['id', 'project_id', 'cidr', 'created_at'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      project_id: { type: 'string' },
      cidr: { type: 'string', description: 'Normalised network, e.g. `10.1.0.0/16` or `2001:db8::/32`.' },
      created_at: dateTime,
    },
  },
  {
    $id: 'Relay',
    type: 'object',
    required: ['id', 'region', 'host', 'port', 'url', 'status'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      region: { type: 'string' },
      host: { type: 'string' },
      port: { type: 'integer' },
      url: { type: 'string', description: '`https://host:port`' },
      status: { type: 'string', enum: ['healthy'], description: 'Only healthy relays are handed out.' },
    },
  },
  {
    $id: 'RegisteredRelay',
    type: 'object',
    required: [
      'id',
      'region',
      'host',
      'port',
      'url',
      'status',
      'load',
      'static',
      'last_heartbeat_at',
      'created_at',
    ],
    additionalProperties: false,
    properties: {
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
      last_heartbeat_at: { type: ['string', 'null'], format: 'date-time' },
      created_at: { type: ['string', 'null'], format: 'date-time' },
    },
  },
  {
    $id: 'RelayCredential',
    type: 'object',
    required: ['token', 'expires_at', 'jti', 'relays', 'fallback'],
    additionalProperties: false,
    properties: {
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
    },
  },
] as const;

export const errorResponse = (description: string) => ({ description, ...ref('Error') });

/** Error responses every route can give. */
export const COMMON_ERRORS = {
  500: errorResponse('Internal error. Retryable.'),
  503: errorResponse('A service behind the gateway is unavailable. Retry after `Retry-After` seconds.'),
} as const;

export const BODY_ERRORS = {
  400: errorResponse('Malformed JSON, a missing or wrongly typed field, or an unknown field.'),
  413: errorResponse('The request body is larger than the limit.'),
  415: errorResponse('The body is not `application/json`.'),
} as const;

export const AUTH_ERRORS = {
  401: errorResponse(
    'Missing, malformed, unknown or expired bearer token or session cookie: `invalid or expired token`.',
  ),
} as const;

export { ref };

/** Values as a prose list of code spans, for descriptions: `` `a`, `b` ``. */
export const codeList = (values: readonly string[]): string => values.map((v) => `\`${v}\``).join(', ');

/** What a route's 403 says before its permission guard names the permission. */
export const GENERIC_FORBIDDEN = 'The principal lacks the permission (docs/iam.md).';

/**
 * The OpenAPI side of a permission guard: the operation names its permission and the roles
 * that hold it, and its 403 says so (docs/iam.md). Applied to every route from its guard.
 */
export function withPermission(schema: FastifySchema | undefined, permission: Permission): FastifySchema {
  const base = (schema ?? {}) as FastifySchema & {
    description?: string;
    response?: Record<string | number, { description?: string }>;
  };
  const roles = (Object.keys(ROLE_PERMISSIONS) as RoleName[]).filter((r) =>
    ROLE_PERMISSIONS[r].has(permission),
  );
  const machines = PROJECT_PERMISSIONS.has(permission)
    ? 'bots and identity tokens whose role (and scopes) grant it'
    : 'never bots or identity tokens';
  const needs = `Needs permission \`${permission}\` (roles ${roles.join(', ')}; ${machines}; docs/iam.md).`;
  const response = { ...(base.response ?? {}) };
  const existing = response[403];
  const lacking = `The principal lacks permission \`${permission}\`.`;
  // A route's own 403 text names its other reasons; the generic one is replaced by the precise one.
  const own = (existing?.description ?? '').replace(GENERIC_FORBIDDEN, '').trim();
  response[403] = existing
    ? { ...existing, description: `${lacking} ${own}`.trim() }
    : errorResponse(lacking);
  return {
    ...base,
    description: base.description ? `${base.description} ${needs}` : needs,
    response,
  } as FastifySchema;
}
