/**
 * Sessions a user controls (docs/iam.md, Sessions): list the caller's login sessions and CLI
 * tokens, end one or all others, change the password. User routes: a bot or identity token is
 * refused (403); with the session cookie, state changes need `X-CSRF-Token`.
 */
import type { SessionInfo } from '@relayplane/proto/admin';
import { principalOf } from '../plugins/auth.ts';
import { clearSessionCookie } from '../plugins/csrf.ts';
import { iso, oneOfValues, required } from '../present.ts';
import {
  dateTime,
  errorResponse,
  noContent,
  nullable,
  nullableDateTime,
  object,
  oneOf,
  PAGE_BAD_REQUEST,
  PAGING,
  pageOf,
  pageParams,
  pageQuery,
  pathParams,
  type Static,
  Type,
} from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const nullableString = nullable(Type.String());

/** One listed session: never its token. */
/** How a session was made: a browser login, a bearer login, the CLI's device flow. */
const SESSION_KINDS = ['browser', 'bearer', 'cli'] as const;

const SESSION_INFO = object({
  id: Type.String({ pattern: '^ses_[0-9a-z]{20}$' }),
  kind: oneOf(SESSION_KINDS, {
    description:
      '`browser`: a login session the session cookie has authenticated (it lives in a browser); `bearer`: a ' +
      'login session only ever sent as `Authorization: Bearer` (until the cookie is seen); `cli`: a CLI token ' +
      'from the device flow (`relayplane login`).',
  }),
  created_at: dateTime(),
  last_used_at: nullableDateTime({
    description:
      'When a request last authenticated with it, to about a minute (written at most once a minute per ' +
      'session); null when never used after it was created.',
  }),
  expires_at: dateTime(),
  ip: {
    ...nullableString,
    description: 'The client address of the login (or, for a CLI token, of the device redeeming its code).',
  },
  user_agent: nullable(
    Type.String({ description: 'The `User-Agent` of that request, at most 256 characters.' }),
  ),
  current: Type.Boolean({ description: 'The session this request was authenticated with.' }),
});

export function presentSessionInfo(s: SessionInfo): Static<typeof SESSION_INFO> {
  return {
    id: s.id,
    kind: oneOfValues(SESSION_KINDS, s.kind, 'session.kind'),
    created_at: required(iso(s.createdAt), 'session.created_at'),
    last_used_at: iso(s.lastUsedAt) ?? null,
    expires_at: required(iso(s.expiresAt), 'session.expires_at'),
    ip: s.ip === '' ? null : s.ip,
    user_agent: s.userAgent === '' ? null : s.userAgent,
    current: s.current,
  };
}

const USER_ROUTE =
  'Bot tokens and identity tokens: 403. With the session cookie, `X-CSRF-Token` is required on state changes.';

export function registerSessions(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/auth/sessions',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'listSessions',
        summary: "The caller's sessions and CLI tokens",
        description:
          "Every unexpired login session and CLI token of the caller's user (in any tenant), newest first. " +
          `No token value is ever answered (only its SHA-256 is stored). ${PAGING} ${USER_ROUTE}`,
        tags: ['auth'],
        querystring: pageQuery(),
        response: { 200: pageOf('sessions', SESSION_INFO), 400: PAGE_BAD_REQUEST },
      },
    },
    async (request) => {
      const res = await clients.admin.listSessions({
        principal: principalOf(request),
        ...pageParams(request.query),
      });
      return { sessions: res.sessions.map(presentSessionInfo), next_cursor: res.nextCursor || null };
    },
  );

  app.delete(
    '/admin/v1/auth/sessions/:id',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'revokeSession',
        summary: 'End one of your sessions or CLI tokens',
        description:
          'Its token answers 401 on every gateway from the next request on (sessions are not cached by ' +
          'gateways). Ending the current session is a logout (the session cookie is cleared when it ' +
          `authenticated the request). Another user's session, like an unknown id: 404. ${USER_ROUTE}`,
        tags: ['auth'],
        params: pathParams('id'),
        response: {
          204: noContent('Ended.'),
          404: errorResponse('No session of yours has this id.'),
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      await clients.admin.revokeSession({ principal, sessionId: request.params.id });
      if (request.params.id === principal.sessionId && request.auth?.via === 'cookie') {
        clearSessionCookie(request, reply);
      }
      return reply.code(204).send();
    },
  );

  const keepIdentityTokens = Type.Boolean({
    description:
      'Keep the identity tokens rooted at you (default false: they are revoked, except those created under the ' +
      'session this request came with, and the tokens created from them).',
  });
  const revokedCounts = {
    sessions: Type.Integer({ minimum: 0, description: 'Other sessions and CLI tokens ended.' }),
    device_grants: Type.Integer({
      minimum: 0,
      description:
        'Device-flow grants approved and not yet redeemed, now refused (their poll answers `access_denied`).',
    }),
    identity_tokens: Type.Integer({ minimum: 0, description: 'Identity tokens rooted at you, revoked.' }),
  } as const;

  app.post(
    '/admin/v1/auth/sessions/revoke-others',
    {
      onRequest: guards.session,
      // The body is optional: a bare POST (what clients sent before it had one) is `{}`.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        operationId: 'revokeOtherSessions',
        summary: 'Sign out everywhere: end every access but this session',
        description:
          'Ends everything derived from your credentials but the session this request came with: every other ' +
          'session and CLI token, device-flow grants approved and not yet redeemed, logins in flight (your ' +
          'credentials epoch moves on), and, unless `keep_identity_tokens`, the identity tokens rooted at you — ' +
          'except those created under this session (and the tokens created from them), which stay. Ended tokens ' +
          'answer 401 on every gateway from the next request on. The body is optional. ' +
          USER_ROUTE,
        tags: ['auth'],
        body: object({ keep_identity_tokens: Type.Optional(keepIdentityTokens) }),
        response: {
          200: object({
            revoked: Type.Integer({
              minimum: 0,
              description: 'Same as `sessions` (kept for older clients).',
            }),
            ...revokedCounts,
          }),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.revokeOtherSessions({
        principal: principalOf(request),
        keepIdentityTokens: request.body.keep_identity_tokens ?? false,
      });
      return {
        revoked: res.revoked,
        sessions: res.revoked,
        device_grants: res.revokedDeviceGrants,
        identity_tokens: res.revokedIdentityTokens,
      };
    },
  );

  app.post(
    '/admin/v1/auth/password',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'changePassword',
        summary: 'Change your password',
        description:
          'Needs the current password (wrong: 403) and, when you have a second factor, a fresh code as ' +
          '`mfa_code` (missing: 403; wrong or replayed: 401). The new one is checked like at signup (12 to 256 ' +
          'characters; 400 otherwise) and must differ from the current one. Everything derived from the old ' +
          'credentials ends, as with `POST /admin/v1/auth/sessions/revoke-others`: every other session and CLI ' +
          'token, approved unredeemed device grants, logins in flight, and (unless `keep_identity_tokens`) the ' +
          'identity tokens rooted at you but those created under this session; the session this request came ' +
          'with stays. Answers what was ended. Attempts count against the same limits as logins: 429 with ' +
          '`Retry-After`. ' +
          USER_ROUTE,
        tags: ['auth'],
        body: object({
          current_password: Type.String({ minLength: 1, maxLength: 256 }),
          new_password: Type.String({ minLength: 1, maxLength: 256 }),
          keep_identity_tokens: Type.Optional(keepIdentityTokens),
          mfa_code: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
        }),
        response: {
          200: object(revokedCounts),
          401: errorResponse('The second-factor code is wrong or was used already.'),
          403: errorResponse('The current password is wrong, or a second-factor code is needed.'),
          409: errorResponse('The password was changed by another request meanwhile: retry.'),
          429: errorResponse('Too many attempts for this account: retry after `Retry-After` seconds.'),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.changePassword({
        principal: principalOf(request),
        currentPassword: request.body.current_password,
        newPassword: request.body.new_password,
        keepIdentityTokens: request.body.keep_identity_tokens ?? false,
        mfaCode: request.body.mfa_code ?? '',
      });
      return {
        sessions: res.revokedSessions,
        device_grants: res.revokedDeviceGrants,
        identity_tokens: res.revokedIdentityTokens,
      };
    },
  );
}
