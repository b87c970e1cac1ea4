/**
 * The OpenAPI 3.1 document, generated from the route schemas so it cannot drift from what is
 * served. A route declares what is its own (summary, parameters, body, success and its own
 * errors); `documentRoute` adds what follows from its guard and its shape: the security scheme,
 * the 401, the permission and CSRF 403s, body and query errors, and the 500/503 every route can
 * give.
 */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import {
  type Permission,
  PROJECT_PERMISSIONS,
  ROLE_PERMISSIONS,
  type RoleName,
} from '@relayplane/shared/iam';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { GuardInfo } from './plugins/auth.ts';
import { CSRF_REFUSED_MESSAGE, isStateChanging } from './plugins/csrf.ts';
import { BODY_ERRORS, COMMON_ERRORS, errorResponse, QUERY_ERRORS } from './schemas.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `false`: the route does not answer the common 500/503 (the probes and this document,
     * which answer without any service behind the gateway).
     */
    commonErrors?: false;
    /**
     * `true`: the body's unknown fields are ignored, not refused (400): a shape owned by another
     * project that may grow (the relay's session events). The body schema must say so too
     * (`additionalProperties: true`), and nothing else may: buildApp refuses either alone.
     */
    openBody?: true;
  }
}

const OPENAPI_INFO = {
  title: 'Relayplane control plane API',
  version: '1.0.0',
  license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
  description:
    'Issues short-lived Ed25519 relay credentials, publishes the keys that verify them, and manages tenants, ' +
    'projects and plans. Every error body is exactly `{"error": "<message>"}`; every response carries ' +
    '`X-Request-Id` (send one to correlate logs). Request bodies are JSON, at most 64 KiB by default, and ' +
    'unknown fields are rejected with 400. Every answer is `Cache-Control: no-store` unless its operation says ' +
    'otherwise; over HTTPS every answer carries `Strict-Transport-Security`. A request must arrive in full ' +
    'within the request timeout (30 s by default), else 408.',
};

export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: OPENAPI_INFO,
      servers: [{ url: '/', description: 'This gateway' }],
      tags: [
        { name: 'health', description: 'Probes' },
        { name: 'auth', description: 'Sign-up, login and sessions' },
        { name: 'projects', description: 'Projects of the active tenant' },
        { name: 'credentials', description: 'Relay credentials and their verification keys' },
        { name: 'api-keys', description: 'Project API keys' },
        { name: 'allowlist', description: 'Project IP allowlists (enforced on API-key requests)' },
        { name: 'relays', description: 'Relay registry, heartbeats, assignment, revocation feed' },
        { name: 'signing-keys', description: 'Signing key life cycle (platform administrators)' },
        { name: 'billing', description: 'Plans and prices' },
        { name: 'docs', description: 'This document' },
      ],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'apiKey',
            in: 'header',
            name: 'X-API-Key',
            description: 'A project API key: `svc_live_` or `svc_test_` + 64 hex.',
          },
          relayNodeToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'A relay node token (prefix `rpr_`) from relay registration.',
          },
          relayNodeBasic: {
            type: 'http',
            scheme: 'basic',
            description:
              'The relay id as user and its node token as password: what moq-relay sends for an `--auth-url` ' +
              'with userinfo (`https://<relay_id>:<rpr_…>@host/v1/relays/auth`).',
          },
          relayCredential: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'A relay credential (the JWT from `POST /api/v1/credentials`).',
          },
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'A session token from `POST /admin/v1/auth/login` (prefix `rpu_`).',
          },
          cookieAuth: {
            type: 'apiKey',
            in: 'cookie',
            name: 'rp_session',
            description:
              'The HttpOnly session cookie `POST /admin/v1/auth/login` sets (the same `rpu_` token): ' +
              '`rp_session` over plain HTTP; over HTTPS (TLS in front of the gateway, `X-Forwarded-Proto` from a ' +
              'trusted proxy) `__Host-rp_session` (`Secure`, `Path=/`, no `Domain`), and only that name is read ' +
              'there. Used only when no `Authorization` header is sent. POST, PUT, PATCH and DELETE must then carry ' +
              "`X-CSRF-Token` (the login answer's `csrf_token`), else 403 `missing or invalid CSRF token`.",
          },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
  });

  app.get(
    '/openapi.json',
    {
      config: { commonErrors: false },
      schema: {
        operationId: 'getOpenApiDocument',
        summary: 'This OpenAPI 3.1 document',
        tags: ['docs'],
        response: {
          200: { description: 'The OpenAPI document.', type: 'object', additionalProperties: true },
        },
      },
    },
    async (_request, reply) =>
      reply.type('application/json; charset=utf-8').send(JSON.stringify(app.swagger())),
  );

  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { deepLinking: true, docExpansion: 'list' },
  });
}

/** The 401 of each security scheme's guard. */
const UNAUTHENTICATED = {
  bearerAuth: errorResponse(
    'Missing, malformed, unknown or expired bearer token or session cookie: `invalid or expired token`.',
  ),
  apiKey: errorResponse('No API key, or an invalid, unknown or revoked one.'),
  relayNodeToken: errorResponse('Missing or invalid relay node token.'),
} as const;

const CSRF_403 = `A cookie-authenticated request without the session's \`X-CSRF-Token\`: \`${CSRF_REFUSED_MESSAGE}\`.`;

type ResponseDoc = { description?: string };
type DocumentedSchema = FastifySchema & {
  description?: string;
  security?: Record<string, string[]>[];
  response?: Record<string | number, ResponseDoc>;
};

export interface RouteFacts {
  methods: readonly string[];
  guard: GuardInfo | undefined;
  commonErrors: boolean;
}

/**
 * A route's schema as documented: its own declarations win; the rest follows from its guard
 * (security, 401, the permission's 403 and description, the session cookie and its CSRF 403),
 * its shape (body and query errors) and `commonErrors`.
 */
export function documentRoute(schema: FastifySchema | undefined, facts: RouteFacts): FastifySchema {
  const own = (schema ?? {}) as DocumentedSchema;
  const { guard } = facts;
  const response: Record<string | number, ResponseDoc> = { ...own.response };
  const add = (errors: Record<number, ResponseDoc>) => {
    for (const [code, error] of Object.entries(errors)) response[code] ??= error;
  };
  // A guard that also takes Basic (the relay auth endpoint's) lists the relayNodeBasic scheme beside its own.
  const security = [
    ...(own.security ??
      (guard ? [{ [guard.scheme]: [] }, ...(guard.basic ? [{ relayNodeBasic: [] }] : [])] : [])),
  ];
  let description = own.description;
  if (guard) add({ 401: UNAUTHENTICATED[guard.scheme] });
  if (guard?.permission) {
    const needs = permissionNeeds(guard.permission);
    description = description ? `${description} ${needs}` : needs;
    // The permission is the first reason for a 403; a route's own 403 names its others.
    const lacking = `The principal lacks permission \`${guard.permission}\`.`;
    const existing = response[403];
    response[403] = existing
      ? { ...existing, description: `${lacking} ${existing.description ?? ''}`.trim() }
      : errorResponse(lacking);
  }
  if (guard?.scheme === 'bearerAuth') {
    // The session cookie is the alternative to the bearer header; state-changing methods then need the CSRF token.
    if (!security.some((s) => 'cookieAuth' in s)) security.push({ cookieAuth: [] });
    if (facts.methods.some(isStateChanging)) {
      const existing = response[403];
      response[403] = existing
        ? { ...existing, description: `${existing.description ?? ''} Or: ${CSRF_403}`.trim() }
        : errorResponse(CSRF_403);
    }
  }
  if (own.body) add(BODY_ERRORS);
  if (own.querystring) add(QUERY_ERRORS);
  if (facts.commonErrors) add(COMMON_ERRORS);
  return {
    ...own,
    ...(description === undefined ? {} : { description }),
    security,
    response,
  } as FastifySchema;
}

/** The operation's note on its permission: the roles that hold it, and whether machines can. */
function permissionNeeds(permission: Permission): string {
  const roles = (Object.keys(ROLE_PERMISSIONS) as RoleName[]).filter((r) =>
    ROLE_PERMISSIONS[r].has(permission),
  );
  const machines = PROJECT_PERMISSIONS.has(permission)
    ? 'bots and identity tokens whose role (and scopes) grant it'
    : 'never bots or identity tokens';
  return `Needs permission \`${permission}\` (roles ${roles.join(', ')}; ${machines}; docs/iam.md).`;
}
