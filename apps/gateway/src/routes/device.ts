/**
 * OAuth 2.0 Device Authorization Grant (RFC 8628) for the CLI: the device authorization and
 * token endpoints, their RFC 8414 metadata, and the JSON approval of a user code. The
 * verification page a browser uses is in device-page.ts. The grants live in admin; these
 * routes parse, present and map errors.
 *
 * The two OAuth endpoints accept `application/x-www-form-urlencoded` (what OAuth clients send)
 * as well as JSON: app.ts registers them in the scope that parses form bodies, everywhere else
 * the gateway stays JSON only. Their errors are the OAuth ones, `{"error": "<code>"}` (RFC 6749
 * §5.2): the code is the message.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { AppError } from '@relayplane/contract/errors';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { TProperties } from 'typebox';
import { CONSOLE_ACTIVATE_PATH } from '../console.ts';
import { principalOf } from '../plugins/auth.ts';
import { oneOfValues } from '../present.ts';
import { publicBaseUrl } from '../public-url.ts';
import { errorResponse, object, oneOf, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const DEVICE_GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:device_code';
const DEVICE_CODE_PATH = '/admin/v1/auth/device/code';
const TOKEN_PATH = '/admin/v1/auth/token';

// RFC 6749 §3.1: a parameter sent without a value counts as omitted (the handlers check presence).
const param = Type.String({ maxLength: 512 });

/** The same parameters as a form (unknown ones ignored, RFC 6749 §3.2) or as JSON (strict, like every JSON body). */
function oauthBody<P extends TProperties>(properties: P, required: (keyof P & string)[]) {
  // Either content type: the handler sees the parameters as sent (a form's may be missing or empty).
  return Type.Unsafe<{ [K in keyof P]?: unknown } | undefined>({
    content: {
      'application/x-www-form-urlencoded': {
        schema: { type: 'object', required, additionalProperties: true, properties },
      },
      'application/json': {
        schema: { type: 'object', required, additionalProperties: false, properties },
      },
    },
  });
}

// OAuth errors are `{"error": "<code>"}`: the platform's Error shape, the code as message.
const NOT_A_FORM = errorResponse(
  'The body is neither form-encoded nor JSON: `{"error": "invalid_request"}`.',
);

/**
 * In the OAuth scope, a request Fastify refuses before the handler (malformed body, schema,
 * media type, size) answers `invalid_request` with its status; everything else goes to the
 * gateway's error handler.
 */
function oauthErrors(error: FastifyError | AppError, _request: FastifyRequest, reply: FastifyReply) {
  const status = error instanceof AppError ? error.httpStatus : (error.statusCode ?? 500);
  if (!(error instanceof AppError) && status >= 400 && status < 500) {
    return reply
      .code(status)
      .type('application/json; charset=utf-8')
      .send(JSON.stringify({ error: 'invalid_request' }));
  }
  throw error;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** The OAuth endpoints, in their own scope (OAuth errors, no caching) inside the form-parsing one. */
export function registerDeviceOAuth(forms: Api, { clients }: RouteDeps): void {
  forms.register(async (untyped) => {
    const scope = untyped.withTypeProvider<TypeBoxTypeProvider>();
    scope.setErrorHandler(oauthErrors);
    // RFC 6749 §5.1: responses carrying codes or tokens are never cached (errors neither).
    scope.addHook('onRequest', async (_request, reply) => {
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    });

    scope.post(
      DEVICE_CODE_PATH,
      {
        schema: {
          operationId: 'startDeviceAuthorization',
          summary: 'Device authorization request (RFC 8628 §3.1)',
          description:
            'Starts the device flow for a public client (`client_id`, default `relayplane-cli`; no secret). Send ' +
            'the parameters as `application/x-www-form-urlencoded` (as OAuth clients do) or as JSON. Answers a ' +
            '`device_code` (256 bits) for the device to poll the token endpoint with, and a `user_code` ' +
            '(`XXXX-XXXX`, consonants only) the user confirms at `verification_uri`. Neither is stored, only ' +
            'their SHA-256. Errors are OAuth errors: `invalid_client` (unknown client), `invalid_request`, ' +
            '`invalid_scope`. Requests are limited per client IP: 429 with `Retry-After`. `Cache-Control: no-store`.',
          tags: ['auth'],
          body: oauthBody({ client_id: param, scope: param }, ['client_id']),
          response: {
            200: object({
              device_code: Type.String(),
              user_code: Type.String({ pattern: '^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$' }),
              verification_uri: Type.String({
                description:
                  "The verification page, `<base>/activate`: the web console's approval page (a gateway without the console redirects it to the server-rendered `<base>/device`).",
              }),
              verification_uri_complete: Type.String({
                description: 'The verification page with the user code filled in.',
              }),
              expires_in: Type.Integer({ description: 'Seconds until both codes expire.' }),
              interval: Type.Integer({ description: 'Seconds to wait between polls of the token endpoint.' }),
            }),
            400: errorResponse('`{"error": "invalid_request" | "invalid_client" | "invalid_scope"}`.'),
            415: NOT_A_FORM,
            429: errorResponse(
              'Too many device authorization requests from this IP: retry after `Retry-After`.',
            ),
          },
        },
      },
      async (request) => {
        const body = request.body ?? {};
        const clientId = str(body.client_id);
        if (!clientId) throw new AppError('invalid_request', 'invalid_request');
        const res = await clients.admin.startDeviceAuthorization({
          clientId,
          scope: str(body.scope) ?? '',
          clientIp: request.ip,
        });
        const verification = `${publicBaseUrl(request)}${CONSOLE_ACTIVATE_PATH}`;
        return {
          device_code: res.deviceCode,
          user_code: res.userCode,
          verification_uri: verification,
          verification_uri_complete: `${verification}?user_code=${encodeURIComponent(res.userCode)}`,
          expires_in: res.expiresIn,
          interval: res.interval,
        };
      },
    );

    scope.post(
      TOKEN_PATH,
      {
        // The handler answers schema failures itself, after the grant type (RFC 6749 §5.2 order).
        attachValidation: true,
        schema: {
          operationId: 'token',
          summary: 'Token endpoint: device access token request (RFC 8628 §3.4)',
          description:
            `Only \`grant_type=${DEVICE_GRANT_TYPE}\`, with \`device_code\` and the \`client_id\` it was issued ` +
            'to; form-encoded or JSON. Answers the CLI token (`rpc_…`, a bearer token acting as the approving ' +
            'user in the tenant they approved in) exactly once per approved grant. Until then, 400 with the ' +
            'OAuth error: `authorization_pending` (not decided yet), `slow_down` (polled sooner than ' +
            '`interval`: the interval grows by 5 s), `access_denied` (the user denied), `expired_token`, ' +
            '`invalid_grant` (unknown or already used device code, or issued to another client), ' +
            '`invalid_client`, `invalid_request`, `unsupported_grant_type`. `Cache-Control: no-store`.',
          tags: ['auth'],
          body: oauthBody({ grant_type: param, device_code: param, client_id: param }, [
            'grant_type',
            'device_code',
            'client_id',
          ]),
          response: {
            200: object({
              access_token: Type.String({ description: 'The CLI token: send as `Authorization: Bearer`.' }),
              token_type: Type.Literal('Bearer'),
              expires_in: Type.Integer({ description: 'Seconds until the CLI token expires.' }),
            }),
            400: errorResponse(
              '`{"error": "<code>"}`: authorization_pending, slow_down, access_denied, expired_token, ' +
                'invalid_grant, invalid_client, invalid_request or unsupported_grant_type.',
            ),
            415: NOT_A_FORM,
          },
        },
      },
      async (request) => {
        const body = request.body ?? {};
        const grantType = str(body.grant_type);
        if (!grantType) throw new AppError('invalid_request', 'invalid_request');
        // Before any other check of the body: another grant type is unsupported, whatever else came.
        if (grantType !== DEVICE_GRANT_TYPE) throw new AppError('invalid_request', 'unsupported_grant_type');
        if (request.validationError) throw new AppError('invalid_request', 'invalid_request');
        const deviceCode = str(body.device_code);
        const clientId = str(body.client_id);
        if (!deviceCode || !clientId) throw new AppError('invalid_request', 'invalid_request');
        const res = await clients.admin.exchangeDeviceCode({ clientId, deviceCode });
        return { access_token: res.accessToken, token_type: 'Bearer' as const, expires_in: res.expiresIn };
      },
    );
  });
}

/** The RFC 8414 metadata and the JSON approval: JSON-only routes. */
export function registerDevice(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/.well-known/oauth-authorization-server',
    {
      schema: {
        operationId: 'getAuthorizationServerMetadata',
        summary: 'OAuth 2.0 authorization server metadata (RFC 8414)',
        description:
          'Names the device authorization and token endpoints for OAuth clients (e.g. the CLI). `issuer` is ' +
          "this gateway's public base URL (scheme and host as the client reached it; forwarded ones believed " +
          'from trusted proxies only). There is no authorization endpoint, so `response_types_supported` is ' +
          'empty. `Cache-Control: public, max-age=300`.',
        tags: ['auth'],
        response: {
          200: object(
            {
              issuer: Type.String(),
              device_authorization_endpoint: Type.String(),
              token_endpoint: Type.String(),
              grant_types_supported: Type.Array(Type.String()),
              response_types_supported: Type.Array(Type.String()),
              token_endpoint_auth_methods_supported: Type.Array(Type.String()),
              service_documentation: Type.Optional(Type.String()),
            },
            { description: 'The metadata document.' },
          ),
        },
      },
    },
    async (request, reply) => {
      const base = publicBaseUrl(request);
      reply
        .header('cache-control', 'public, max-age=300')
        .header('vary', 'host, x-forwarded-host, x-forwarded-proto');
      return {
        issuer: base,
        device_authorization_endpoint: `${base}${DEVICE_CODE_PATH}`,
        token_endpoint: `${base}${TOKEN_PATH}`,
        grant_types_supported: [DEVICE_GRANT_TYPE],
        // RFC 8414 requires the member; without an authorization endpoint no response type exists.
        response_types_supported: [],
        token_endpoint_auth_methods_supported: ['none'],
        service_documentation: `${base}/docs`,
      };
    },
  );

  app.post(
    '/admin/v1/auth/device/approve',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'decideDeviceAuthorization',
        summary: 'Approve or deny a device (RFC 8628 user code)',
        description:
          'As the calling user (a login session: bearer or cookie with `X-CSRF-Token`; a CLI token cannot ' +
          'approve): `approve` lets the device that shows `user_code` receive a CLI token acting as this user ' +
          'in the active tenant; `deny` makes its polls answer `access_denied`. The code may be typed in any ' +
          'case, with or without the dash. A user with a second factor approves only with a fresh code as ' +
          '`mfa_code` (missing: 403; wrong or replayed: 401). The approval holds only while this session does: ' +
          'if it ends, or the password changes, or you sign out everywhere before the device redeems it, its ' +
          'poll answers `access_denied`. Entries are limited per user and per client IP (IPv6 by /64): 429 with ' +
          '`Retry-After`.',
        tags: ['auth'],
        body: object({
          user_code: Type.String({ minLength: 1, maxLength: 64 }),
          action: oneOf(['approve', 'deny']),
          mfa_code: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
        }),
        response: {
          200: object({ status: oneOf(['approved', 'denied']), client_id: Type.String() }),
          401: errorResponse('The second-factor code is wrong or was used already.'),
          403: errorResponse(
            'A bot token or a CLI token (devices are approved from a login session), or a second-factor code is needed.',
          ),
          404: errorResponse(
            'No pending device authorization for this code: unknown, expired, or already decided.',
          ),
          429: errorResponse('Too many user codes entered: retry after `Retry-After` seconds.'),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.decideDeviceGrant({
        principal: principalOf(request),
        userCode: request.body.user_code,
        approve: request.body.action === 'approve',
        clientIp: request.ip,
        mfaCode: request.body.mfa_code ?? '',
      });
      return {
        status: oneOfValues(['approved', 'denied'], res.status, 'device grant status'),
        client_id: res.clientId,
      };
    },
  );
}
