import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { RegisteredRelay, Relay } from '../components.ts';
import { presentRegisteredRelay, presentRelay, required } from '../present.ts';
import {
  errorResponse,
  noContent,
  object,
  PAGE_BAD_REQUEST,
  PAGING,
  pageOf,
  pageParams,
  pageQuery,
  pathParams,
  ref,
  Type,
} from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const FORBIDDEN = errorResponse('Only platform administrators manage relays.');
const JWT_BEARER = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/;

export function registerRelays(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/relays',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'listRelays',
        summary: 'List relays (static and registered) with their health',
        description:
          'Static relays (`RELAYPLANE_RELAYS_FILE`, in file order), then registered ones, oldest first. ' +
          `${PAGING} Registered relays are paged where they are stored: one registered or removed ` +
          'while you page neither repeats nor shifts the others.',
        tags: ['relays'],
        querystring: pageQuery(),
        response: {
          200: pageOf('relays', ref(RegisteredRelay)),
          400: PAGE_BAD_REQUEST,
          403: FORBIDDEN,
        },
      },
    },
    async (request) => {
      const res = await clients.issuer.listRelays(pageParams(request.query));
      return { relays: res.relays.map(presentRegisteredRelay), next_cursor: res.nextCursor || null };
    },
  );

  app.post(
    '/admin/v1/relays',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'registerRelay',
        summary: 'Register a relay (answers its node token once)',
        description:
          'The relay node token (`rpr_…`) authenticates heartbeats, the revocation feed and introspection; only its ' +
          'hash is stored. A relay is healthy while its heartbeats arrive within the health window. ' +
          '`client_certificate_sha256` (optional; the SHA-256 of the DER of a client certificate, 64 hex digits, ' +
          'colons allowed) lets the relay authenticate at `POST /v1/relays/auth` with that certificate instead of ' +
          'its token, as forwarded by a TLS-terminating proxy in GATEWAY_TRUSTED_PROXIES (docs/credentials.md).',
        tags: ['relays'],
        body: object({
          region: Type.String({ pattern: '^[a-z0-9-]{1,32}$' }),
          host: Type.String({ minLength: 1, maxLength: 253 }),
          port: Type.Integer({ minimum: 1, maximum: 65535 }),
          client_certificate_sha256: Type.Optional(Type.String({ maxLength: 95 })),
        }),
        response: {
          201: object({
            relay: ref(RegisteredRelay),
            token: Type.String({ description: 'Shown only here.' }),
          }),
          403: FORBIDDEN,
          409: errorResponse(
            'A relay with this host and port, or with this client certificate, is registered.',
          ),
        },
      },
    },
    async (request, reply) => {
      const { client_certificate_sha256, ...relay } = request.body;
      const res = await clients.issuer.registerRelay({
        ...relay,
        clientCertificateSha256: client_certificate_sha256 ?? '',
      });
      const registered = required(res.relay, 'registerRelay.relay');
      return reply.code(201).send({ relay: presentRegisteredRelay(registered), token: res.token });
    },
  );

  app.delete(
    '/admin/v1/relays/:relay_id',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'deleteRelay',
        summary: 'Remove a registered relay',
        description:
          'Its node token stops working. Static relays are configured in `RELAYPLANE_RELAYS_FILE` instead.',
        tags: ['relays'],
        params: pathParams('relay_id'),
        response: {
          204: noContent('Removed.'),
          400: errorResponse('A static relay cannot be removed through the API.'),
          403: FORBIDDEN,
          404: errorResponse('No such relay.'),
        },
      },
    },
    async (request, reply) => {
      await clients.issuer.deleteRelay({ relayId: request.params.relay_id });
      return reply.code(204).send();
    },
  );

  app.post(
    '/v1/relays/heartbeat',
    {
      onRequest: guards.relayNode,
      schema: {
        operationId: 'relayHeartbeat',
        summary: 'Relay heartbeat with its load',
        description: '`load` from 0 (idle) to 1 (full). Assignment prefers the least loaded healthy relays.',
        tags: ['relays'],
        body: object({ load: Type.Number({ minimum: 0, maximum: 1 }) }),
        response: {
          200: object({ relay: ref(RegisteredRelay) }),
        },
      },
    },
    async (request) => {
      const relay = request.relay;
      if (!relay) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      // A relay removed a moment ago may still pass the token cache: its token no longer works.
      const res = await clients.issuer
        .heartbeat({ relayId: relay.id, load: request.body.load })
        .catch((err: unknown) => {
          if (err instanceof AppError && err.code === 'not_found')
            throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
          throw err;
        });
      return { relay: presentRegisteredRelay(required(res.relay, 'heartbeat.relay')) };
    },
  );

  app.get(
    '/v1/relays/assignment',
    {
      schema: {
        operationId: 'getRelayAssignment',
        summary: 'Fresh relays for a connected client',
        description:
          'For a client whose relay failed: present its relay credential as bearer. A revoked, expired or forged ' +
          "credential: 401 `invalid or expired token`. `region` overrides the credential's region hint.",
        tags: ['relays'],
        // No guard: the handler reads the relay credential, which only the issuer can check.
        security: [{ relayCredential: [] }],
        querystring: object({ region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,32}$' })) }),
        response: {
          200: object({ relays: Type.Array(ref(Relay)), fallback: Type.Array(Type.String()) }),
          401: errorResponse(
            'Missing credential, or a revoked, expired or forged one: `invalid or expired token`.',
          ),
        },
      },
    },
    async (request) => {
      const header = request.headers.authorization;
      if (!header)
        throw new AppError(
          'unauthenticated',
          'missing credential: send "Authorization: Bearer <relay credential>"',
        );
      const token = JWT_BEARER.exec(header)?.[1];
      if (!token || token.length > 8192) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
      const res = await clients.issuer.assignRelays({ token, region: request.query.region ?? '' });
      return { relays: res.relays.map(presentRelay), fallback: res.fallback };
    },
  );
}
