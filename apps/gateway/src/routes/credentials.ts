import {
  CREDENTIAL_SCOPES,
  CREDENTIAL_TTL_SECONDS,
  DEFAULT_CREDENTIAL_SCOPES,
  isCredentialScope,
} from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { iso, isoSecond, presentRelay } from '../present.ts';
import {
  AUTH_ERRORS,
  BODY_ERRORS,
  COMMON_ERRORS,
  codeList,
  errorResponse,
  GENERIC_FORBIDDEN,
  ref,
} from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const RELAY_AUTH = [{ relayNodeToken: [] }];

export function registerCredentials(
  app: FastifyInstance,
  { clients, guards, entitlements, issuance, shutdown }: RouteDeps,
): void {
  app.post<{ Body: { scopes?: string[]; ttl_seconds?: number; region?: string } }>(
    '/api/v1/credentials',
    {
      onRequest: guards.apiKey,
      schema: {
        operationId: 'issueCredential',
        summary: 'Issue a relay credential',
        description:
          'Mints a short-lived Ed25519 JWT for connecting to relays, plus the relays to use. `scopes` default to ' +
          `\`${JSON.stringify(DEFAULT_CREDENTIAL_SCOPES)}\` (known: ${codeList(CREDENTIAL_SCOPES)}); ` +
          'each must be granted to the API key (403). ' +
          `\`ttl_seconds\` defaults to ${CREDENTIAL_TTL_SECONDS.default}, ${CREDENTIAL_TTL_SECONDS.min}..${CREDENTIAL_TTL_SECONDS.max}, and at most the plan's maximum (400). ` +
          "`region` biases relay assignment. Each credential holds one of the tenant's concurrent-connection slots " +
          "until it expires or is revoked; at the plan's cap: 402. When the connection counters are unreachable: 503 " +
          'with `Retry-After` (never a credential).',
        tags: ['credentials'],
        security: [{ apiKey: [] }],
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            scopes: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'string', maxLength: 64 } },
            ttl_seconds: {
              type: 'integer',
              minimum: CREDENTIAL_TTL_SECONDS.min,
              maximum: CREDENTIAL_TTL_SECONDS.max,
            },
            region: { type: 'string', pattern: '^[a-z0-9-]{1,32}$' },
          },
        },
        response: {
          201: ref('RelayCredential'),
          ...BODY_ERRORS,
          401: errorResponse('No API key, or an invalid, unknown or revoked one.'),
          402: errorResponse("The plan's concurrent connection cap is reached: upgrade the plan."),
          403: errorResponse(
            "A requested scope is not granted to the API key, or the client IP is not in the project's allowlist.",
          ),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const auth = request.apiKey;
      if (!auth) throw new AppError('unauthenticated', 'missing API key');
      const body = request.body ?? {};
      const scopes = [...new Set(body.scopes ?? DEFAULT_CREDENTIAL_SCOPES)];
      for (const scope of scopes) {
        if (!isCredentialScope(scope)) {
          throw new AppError(
            'invalid_request',
            `unknown scope "${scope}" (known: ${CREDENTIAL_SCOPES.join(', ')})`,
          );
        }
        if (!auth.apiKey.scopes.includes(scope)) {
          throw new AppError('forbidden', `scope "${scope}" is not granted to this API key`);
        }
      }
      // Cached entitlements are taken without waiting (the hot path); a miss asks billing.
      const plan = entitlements.peek(auth.apiKey.tenantId) ?? (await entitlements.get(auth.apiKey.tenantId));
      const ttl = body.ttl_seconds ?? Math.min(CREDENTIAL_TTL_SECONDS.default, plan.maxCredentialTtlSeconds);
      if (ttl > plan.maxCredentialTtlSeconds) {
        throw new AppError(
          'invalid_request',
          `ttl_seconds ${ttl} exceeds the ${plan.planName} plan's maximum of ${plan.maxCredentialTtlSeconds}`,
        );
      }
      const res = await issuance
        .issue({
          tenantId: auth.apiKey.tenantId,
          projectId: auth.apiKey.projectId,
          apiKeyId: auth.apiKey.id,
          mode: auth.apiKey.mode,
          scopes,
          ttlSeconds: ttl,
          region: body.region ?? '',
          maxConcurrentConnections: plan.maxConcurrentConnections,
        })
        .catch((err: unknown) => {
          // The issuer counts; billing words the refusal (limit and plan named).
          if (err instanceof AppError && err.code === 'payment_required') {
            throw new AppError('payment_required', plan.connectionsExceeded);
          }
          throw err;
        });
      return reply.code(201).send({
        token: res.token,
        expires_at: isoSecond(res.expiresAt),
        jti: res.jti,
        relays: res.relays.map(presentRelay),
        fallback: res.fallback,
      });
    },
  );

  app.post<{ Params: { jti: string } }>(
    '/admin/v1/credentials/:jti/revoke',
    {
      onRequest: guards.allow('credentials:revoke'),
      schema: {
        operationId: 'revokeCredential',
        summary: 'Revoke a relay credential',
        description:
          'Idempotent: revoking again answers the first `revoked_at`. Frees its connection slot; relays learn of it ' +
          "through the revocation feed. Another tenant's (or an unknown) `jti`: 404.",
        tags: ['credentials'],
        security: [{ bearerAuth: [] }],
        params: {
          type: 'object',
          required: ['jti'],
          properties: { jti: { type: 'string', maxLength: 64 } },
        },
        response: {
          200: {
            type: 'object',
            required: ['jti', 'revoked_at'],
            additionalProperties: false,
            properties: { jti: { type: 'string' }, revoked_at: { type: 'string', format: 'date-time' } },
          },
          ...AUTH_ERRORS,
          403: errorResponse(GENERIC_FORBIDDEN),
          404: errorResponse('No such credential in the active tenant.'),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const res = await clients.issuer.revokeCredential({
        tenantId: principal.tenantId,
        jti: request.params.jti,
      });
      return { jti: res.jti, revoked_at: iso(res.revokedAt) };
    },
  );

  app.get<{ Querystring: { cursor?: string; wait?: string; limit?: string } }>(
    '/v1/credentials/revocations',
    {
      onRequest: guards.relayNode,
      schema: {
        operationId: 'listRevocations',
        summary: 'Revocation feed for relays',
        description:
          'Revocations after `cursor` (start at 0), oldest first. With `wait` (seconds, 0..30) the request is held ' +
          'until one exists or the wait ends (long-poll), so a relay looping on it learns of a revocation within ' +
          'a round trip. Pass `next_cursor` as the next `cursor`. Entries may be forgotten after their `expires_at`.',
        tags: ['relays'],
        security: RELAY_AUTH,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            cursor: { type: 'string', pattern: '^[0-9]{1,15}$' },
            wait: { type: 'string', pattern: '^([0-9]|[12][0-9]|30)$' },
            limit: { type: 'string', pattern: '^([1-9][0-9]{0,2}|1000)$' },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['revocations', 'next_cursor'],
            additionalProperties: false,
            properties: {
              revocations: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['sequence', 'jti', 'revoked_at', 'expires_at'],
                  additionalProperties: false,
                  properties: {
                    sequence: { type: 'integer' },
                    jti: { type: 'string' },
                    revoked_at: { type: 'string', format: 'date-time' },
                    expires_at: { type: 'string', format: 'date-time' },
                  },
                },
              },
              next_cursor: { type: 'integer' },
            },
          },
          400: errorResponse('A malformed query parameter.'),
          401: errorResponse('Missing or invalid relay node token.'),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const waitMs = Number(request.query.wait ?? 0) * 1000;
      const cursor = BigInt(request.query.cursor ?? 0);
      // A held poll ends when its client goes away or the gateway shuts down (then: nothing new).
      const controller = new AbortController();
      const abort = () => controller.abort();
      reply.raw.once('close', abort);
      shutdown.addEventListener('abort', abort, { once: true });
      let res: Awaited<ReturnType<typeof clients.issuer.listRevocations>>;
      try {
        res = await clients.issuer.listRevocations(
          { cursor, limit: Number(request.query.limit ?? 100), waitMs },
          { deadline: new Date(Date.now() + waitMs + 5_000), signal: controller.signal },
        );
      } catch (err) {
        if (controller.signal.aborted) return { revocations: [], next_cursor: Number(cursor) };
        throw err;
      } finally {
        reply.raw.off('close', abort);
        shutdown.removeEventListener('abort', abort);
      }
      return {
        revocations: res.revocations.map((r) => ({
          sequence: Number(r.sequence),
          jti: r.jti,
          revoked_at: iso(r.revokedAt),
          expires_at: iso(r.expiresAt),
        })),
        next_cursor: Number(res.nextCursor),
      };
    },
  );

  // RFC 7662 introspection takes a form body: that parser exists only in this route's scope,
  // so every other route stays JSON-only (415).
  app.register(async (scope) => {
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string' },
      (_req, body, done) => {
        done(null, Object.fromEntries(new URLSearchParams(body as string)));
      },
    );
    scope.post<{ Body: { token: string } }>(
      '/v1/credentials/introspect',
      {
        onRequest: guards.relayNode,
        schema: {
          operationId: 'introspectCredential',
          summary: 'Introspect a relay credential (RFC 7662)',
          description:
            'Body `token=<credential>` as `application/x-www-form-urlencoded` (RFC 7662) or JSON `{"token": …}`. ' +
            'Answers the claims with `active: true` for a valid credential, and exactly `{"active": false}` for an ' +
            'expired, revoked, forged or malformed one.',
          tags: ['relays'],
          security: RELAY_AUTH,
          body: {
            type: 'object',
            required: ['token'],
            additionalProperties: false,
            properties: { token: { type: 'string', maxLength: 8192 }, token_type_hint: { type: 'string' } },
          },
          response: {
            200: {
              type: 'object',
              required: ['active'],
              additionalProperties: false,
              properties: {
                active: { type: 'boolean' },
                scope: { type: 'string' },
                client_id: { type: 'string' },
                token_type: { type: 'string' },
                sub: { type: 'string' },
                aud: { type: 'string' },
                iss: { type: 'string' },
                jti: { type: 'string' },
                exp: { type: 'integer' },
                iat: { type: 'integer' },
                nbf: { type: 'integer' },
                tid: { type: 'string' },
                pid: { type: 'string' },
                mode: { type: 'string' },
              },
            },
            ...BODY_ERRORS,
            401: errorResponse('Missing or invalid relay node token.'),
            ...COMMON_ERRORS,
          },
        },
      },
      async (request) => {
        const res = await clients.issuer.introspectCredential({ token: request.body.token });
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
      },
    );
  });
}
