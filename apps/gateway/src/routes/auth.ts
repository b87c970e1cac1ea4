import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import {
  clearSessionCookie,
  csrfTokenFor,
  SECURE_SESSION_COOKIE,
  SESSION_COOKIE,
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
import { errorResponse, object, ref } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const credentials = {
  email: { type: 'string', minLength: 3, maxLength: 254 },
  password: { type: 'string', minLength: 1, maxLength: 256 },
} as const;

export function registerAuth(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  app.post<{ Body: { email: string; password: string; tenant_name: string } }>(
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
        body: object({ ...credentials, tenant_name: { type: 'string', minLength: 1, maxLength: 64 } }),
        response: {
          201: object({ user: ref('User'), tenant: ref('Tenant') }),
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

  app.post<{ Body: { email: string; password: string } }>(
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
          'password get the same 401, and count the same. Attempts are limited in a fixed window ' +
          '(`ADMIN_LOGIN_WINDOW_SECONDS`, default 900 s) per account from one client IP (tight, default 10), per ' +
          'account from every client IP (loose, default 100: an attacker rotating IPs is slowed, the owner ' +
          'logging in from elsewhere is not locked out) and per client IP across accounts (default 50); over any ' +
          'of them 429 with `Retry-After`, before the password is checked. A successful login resets the count ' +
          'of its account from its client IP.',
        tags: ['auth'],
        body: object(credentials),
        response: {
          200: object({
            token: { type: 'string' },
            csrf_token: {
              type: 'string',
              description:
                'Send as `X-CSRF-Token` on state-changing requests authenticated by the session cookie.',
            },
            token_type: { type: 'string', const: 'Bearer' },
            expires_at: { type: 'string', format: 'date-time' },
            session: ref('Session'),
          }),
          401: errorResponse('Invalid email or password.'),
          429: errorResponse(
            'Too many login attempts for this account from this client IP, for this account, or from this ' +
              'client IP: retry after `Retry-After` seconds.',
          ),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.login({
        email: request.body.email,
        password: request.body.password,
        clientIp: request.ip,
      });
      const session = presentSession(required(res.session, 'login.session'));
      setSessionCookie(request, reply, res.token, session.expires_at);
      return {
        token: res.token,
        token_type: 'Bearer' as const,
        expires_at: session.expires_at,
        csrf_token: csrfTokenFor(res.token),
        session,
      };
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
        response: { 200: { anyOf: [ref('Session'), ref('BotSession')] } },
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
        response: { 204: { description: 'Logged out.', type: 'null' } },
      },
    },
    async (request, reply) => {
      await clients.admin.logout({ principal: principalOf(request) });
      clearSessionCookie(request, reply);
      return reply.code(204).send();
    },
  );
}
