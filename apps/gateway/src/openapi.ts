import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

export const OPENAPI_INFO = {
  title: 'Relayplane control plane API',
  version: '1.0.0',
  license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
  description:
    'Issues short-lived Ed25519 relay credentials, publishes the keys that verify them, and manages tenants, ' +
    'projects and plans. Every error body is exactly `{"error": "<message>"}`; every response carries ' +
    '`X-Request-Id` (send one to correlate logs). Request bodies are JSON, at most 64 KiB by default, and ' +
    'unknown fields are rejected with 400.',
};

/** The OpenAPI 3.1 document is generated from the route schemas, so it cannot drift from what is served. */
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
              'The HttpOnly session cookie `POST /admin/v1/auth/login` sets (the same `rpu_` token). Used ' +
              'only when no `Authorization` header is sent. POST, PUT, PATCH and DELETE must then carry ' +
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
      schema: {
        operationId: 'getOpenApiDocument',
        summary: 'This OpenAPI 3.1 document',
        tags: ['docs'],
        security: [],
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
