import type { Session } from '@relayplane/proto/admin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { BotSession, MfaChallenge, Session as SessionSchema, Tenant, User } from '../components.ts';
import { principalOf } from '../plugins/auth.ts';
import {
  clearSessionCookie,
  csrfTokenFor,
  DEVICE_COOKIE,
  deviceCookieOf,
  SECURE_DEVICE_COOKIE,
  SECURE_SESSION_COOKIE,
  SESSION_COOKIE,
  setDeviceCookie,
  setSessionCookie,
} from '../plugins/csrf.ts';
import {
  presentBotSession,
  presentOwnSession,
  presentSession,
  presentTenant,
  presentUser,
  required,
} from '../present.ts';
import { dateTime, errorResponse, noContent, object, ref, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const credentials = {
  email: Type.String({ minLength: 3, maxLength: 254 }),
  password: Type.String({ minLength: 1, maxLength: 256 }),
} as const;

export const MFA_REQUIRED_MESSAGE =
  'a second factor is required: send the mfa_token and a code to /admin/v1/auth/login/mfa';

export function registerAuth(app: Api, { clients, guards }: RouteDeps): void {
  app.post(
    '/admin/v1/auth/signup',
    {
      schema: {
        operationId: 'signup',
        summary: 'Sign up: a new tenant on the free plan and its owner',
        description:
          'Can be disabled by the operator (`RELAYPLANE_SIGNUP_ENABLED=false`: 403). Passwords: 12 to 256 characters. ' +
          'Sign-ups are limited per client IP (`ADMIN_SIGNUP_MAX_PER_IP`, default 10 per ' +
          '`ADMIN_SIGNUP_WINDOW_SECONDS`, default 3600): every well-formed attempt counts, a taken email too; ' +
          'over the limit 429 with `Retry-After` (seconds until the window ends).',
        tags: ['auth'],
        body: object({ ...credentials, tenant_name: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: {
          201: object({ user: ref(User), tenant: ref(Tenant) }),
          403: errorResponse('Signup is disabled on this installation.'),
          409: errorResponse('The email is already registered.'),
          429: errorResponse('Too many sign-ups from this client IP: retry after `Retry-After` seconds.'),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.signup({
        email: request.body.email,
        password: request.body.password,
        tenantName: request.body.tenant_name,
      });
      return reply.code(201).send({
        user: presentUser(required(res.user, 'signup.user')),
        tenant: presentTenant(required(res.tenant, 'signup.tenant')),
      });
    },
  );

  const loggedIn = object({
    token: Type.String(),
    csrf_token: Type.String({
      description: 'Send as `X-CSRF-Token` on state-changing requests authenticated by the session cookie.',
    }),
    token_type: Type.Literal('Bearer'),
    expires_at: dateTime(),
    session: ref(SessionSchema),
    device_token: Type.String({
      description:
        "This client's device token (also set as the device cookie): send it back as `device_token` on later " +
        "logins, so they count against this device's own limit and are never refused by the account-wide one.",
    }),
  });
  const answerLogin = (
    request: FastifyRequest,
    reply: FastifyReply,
    res: { token: string; session?: Session | undefined; deviceToken: string },
  ) => {
    const session = presentSession(required(res.session, 'login.session'));
    setSessionCookie(request, reply, res.token, session.expires_at);
    setDeviceCookie(request, reply, res.deviceToken);
    return {
      token: res.token,
      token_type: 'Bearer' as const,
      expires_at: session.expires_at,
      csrf_token: csrfTokenFor(res.token),
      session,
      device_token: res.deviceToken,
    };
  };
  const deviceTokenOf = (request: FastifyRequest, body: { device_token?: string }) =>
    body.device_token ?? deviceCookieOf(request) ?? '';

  app.post(
    '/admin/v1/auth/login',
    {
      schema: {
        operationId: 'login',
        summary: 'Log in with email and password',
        description:
          'Answers a bearer session token (prefix `rpu_`), shown only here and stored hashed. Send it as ' +
          '`Authorization: Bearer <token>`. The same token is also set as the session cookie ' +
          `\`${SESSION_COOKIE}\` over HTTP, \`${SECURE_SESSION_COOKIE}\` with \`Secure\` over HTTPS (a trusted proxy's ` +
          '`X-Forwarded-Proto: https`) (`HttpOnly; SameSite=Strict; Path=/`, `Max-Age` = ' +
          'the session lifetime) for browsers. A request authenticated by that cookie (no `Authorization` ' +
          'header) must send `csrf_token` as `X-CSRF-Token` on every POST, PUT, PATCH and DELETE, else 403 ' +
          '`missing or invalid CSRF token`; bearer requests need no CSRF token. Wrong email and wrong ' +
          'password get the same 401. ' +
          '**Second factor**: for a user with TOTP, the right password answers 401 ' +
          '`{"error", "mfa_required": true, "mfa_token"}` and no session; `POST /admin/v1/auth/login/mfa` with the ' +
          '`mfa_token` (single use, 5 minutes) and a code finishes the login. ' +
          '**Throttling** (docs/iam.md, "Login throttling"), counted before the password is checked, in a fixed ' +
          'window (`ADMIN_LOGIN_WINDOW_SECONDS`, default 900 s); a client IP is an IPv4 address or an IPv6 /64 ' +
          '(`RELAYPLANE_THROTTLE_IPV6_PREFIX`): per account from one client IP (default 10), per client IP across ' +
          'accounts (default 50), and per account from one known device (default 10; a known device is one ' +
          'that sends a valid `device_token`, in the body or the device cookie ' +
          `\`${DEVICE_COOKIE}\`/\`${SECURE_DEVICE_COOKIE}\`, answered by an earlier successful login). The account-wide ` +
          'limit counts **failures** only (default 100) and never refuses a known device; past it, unknown clients ' +
          'of the account share one attempt per `ADMIN_LOGIN_SLOW_SECONDS` (default 10): 429 with a `Retry-After` ' +
          'of at most that, never the rest of the window. A successful login resets the count of its account ' +
          'from its client (or device).',
        tags: ['auth'],
        body: object({
          ...credentials,
          device_token: Type.Optional(
            Type.String({
              maxLength: 512,
              description:
                'The `device_token` an earlier successful login answered (browsers send the cookie instead).',
            }),
          ),
        }),
        response: {
          200: loggedIn,
          401: {
            description:
              'Invalid email or password (`{"error"}`), or the password was right and a second factor is needed ' +
              '(`{"error", "mfa_required": true, "mfa_token"}`).',
            ...ref(MfaChallenge),
          },
          429: errorResponse(
            'Too many login attempts for this account from this client IP or device, from this client IP, or ' +
              '(unknown clients) past the account-wide failure limit: retry after `Retry-After` seconds.',
          ),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.login({
        email: request.body.email,
        password: request.body.password,
        clientIp: request.ip,
        deviceToken: deviceTokenOf(request, request.body),
      });
      if (res.mfaRequired) {
        return reply.code(401).send({
          error: MFA_REQUIRED_MESSAGE,
          mfa_required: true,
          mfa_token: res.mfaToken,
        });
      }
      return answerLogin(request, reply, res);
    },
  );

  app.post(
    '/admin/v1/auth/login/mfa',
    {
      schema: {
        operationId: 'loginMfa',
        summary: 'Log in, second step: the mfa_token and a code',
        description:
          'Finishes the login of a user with a second factor: the `mfa_token` the password step answered (single ' +
          'use, 5 minutes, at most 5 wrong codes) and a current 6-digit TOTP code or an unused recovery code. ' +
          'Answers like `POST /admin/v1/auth/login`. A TOTP code is accepted once (a replay is refused); a ' +
          'recovery code once ever. Throttled like passwords (the same limits and counts); 429 with `Retry-After`.',
        tags: ['auth'],
        body: object({
          mfa_token: Type.String({ minLength: 1, maxLength: 128 }),
          code: Type.String({ minLength: 1, maxLength: 64 }),
          device_token: Type.Optional(Type.String({ maxLength: 512 })),
        }),
        response: {
          200: loggedIn,
          401: errorResponse(
            'The code is wrong or was used already, or the mfa_token is invalid, used or expired.',
          ),
          429: errorResponse('Too many attempts: retry after `Retry-After` seconds.'),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.loginMfa({
        mfaToken: request.body.mfa_token,
        code: request.body.code,
        clientIp: request.ip,
        deviceToken: deviceTokenOf(request, request.body),
      });
      return answerLogin(request, reply, res);
    },
  );

  app.get(
    '/admin/v1/auth/session',
    {
      onRequest: guards.principal,
      schema: {
        operationId: 'getSession',
        summary: 'The current session',
        description:
          'User, active tenant, role, expiry and how the request was authenticated (`bearer` or `cookie`). ' +
          'Authenticated by the session cookie, it also answers the `csrf_token` to send as `X-CSRF-Token`. ' +
          'A bot token answers its bot instead (`authenticated_by: bot_token`): the tenant, the project it ' +
          'acts within and its role; an identity token answers its identity (the bot) and the token ' +
          '(`authenticated_by: identity_token`). `permissions` lists what the principal holds (docs/iam.md).',
        tags: ['auth'],
        response: { 200: { anyOf: [ref(SessionSchema), ref(BotSession)] } },
      },
    },
    async (request) => {
      const bot = request.auth?.bot;
      if (bot) return presentBotSession(principalOf(request), bot, request.auth?.identityToken);
      return presentOwnSession(request, required(request.auth?.session, 'authenticate.session'));
    },
  );

  app.post(
    '/admin/v1/auth/logout',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'logout',
        summary: 'Log out: the session token stops working',
        description:
          'Ends the session (bearer or cookie) and clears the session cookie (`Max-Age=0`). With the ' +
          'cookie, `X-CSRF-Token` is required like on every state-changing request.',
        tags: ['auth'],
        response: { 204: noContent('Logged out.') },
      },
    },
    async (request, reply) => {
      await clients.admin.logout({ principal: principalOf(request) });
      clearSessionCookie(request, reply);
      return reply.code(204).send();
    },
  );
}
