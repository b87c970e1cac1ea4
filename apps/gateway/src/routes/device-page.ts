/**
 * The RFC 8628 verification page (`/device`): server-rendered HTML, no script. Not logged in:
 * a login form that logs in through admin's Login (same throttle) and sets the session cookie
 * like `POST /admin/v1/auth/login`, then comes back with the code kept. Logged in: the code and
 * the client, where and when it asked (IP address, time, user agent) and a warning that approving
 * gives it the user's access, with Approve and Deny. Form posts carry the session's CSRF token as a hidden field,
 * checked like `X-CSRF-Token`; posts from another origin are refused as well.
 */

import { AppError } from '@relayplane/contract/errors';
import { parseToken } from '@relayplane/contract/tokens';
import { type Principal, PrincipalKind, type Session } from '@relayplane/proto/admin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { devicePages, page, VERIFICATION_LOGIN_PATH, VERIFICATION_PATH } from '../html.ts';
import {
  csrfMatches,
  csrfTokenFor,
  deviceCookieOf,
  issueLoginCsrf,
  loginCsrfMatches,
  sessionCookieOf,
  setDeviceCookie,
  setSessionCookie,
} from '../plugins/csrf.ts';
import { iso, required } from '../present.ts';
import { publicBaseUrl } from '../public-url.ts';
import { htmlResponse, Type } from '../schemas.ts';
import { loginWithOptionalCode } from '../workflows/login.ts';
import type { Api, RouteDeps } from './deps.ts';

/** The login form, with a fresh login CSRF token (cookie and hidden field). */
function loginPage(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  form: { userCode: string; email?: string; message?: string },
): FastifyReply {
  const loginCsrf = issueLoginCsrf(request, reply, VERIFICATION_PATH);
  return page(reply, status, devicePages.login({ ...form, loginCsrf }));
}

interface BrowserSession {
  token: string;
  principal: Principal;
  session: Session;
}

const PAGE_ERRORS = new Set(['invalid_request', 'not_found', 'forbidden', 'rate_limited']);

/** An AppError the page shows (with its status); anything else is the gateway's error handler's. */
function shown(err: unknown): AppError | undefined {
  return err instanceof AppError && PAGE_ERRORS.has(err.code) ? err : undefined;
}

function withRetryAfter(reply: FastifyReply, err: AppError): FastifyReply {
  if (err.retryAfterSeconds !== undefined) reply.header('retry-after', String(err.retryAfterSeconds));
  return reply;
}

/** Admin refused the code (unknown, malformed, throttled…): the entry form again, saying why. */
function refusedCode(reply: FastifyReply, err: unknown, session: Session, userCode: string): FastifyReply {
  const e = shown(err);
  if (!e) throw err;
  return page(
    withRetryAfter(reply, e),
    e.httpStatus,
    devicePages.entry(session, { userCode, message: e.message }),
  );
}

/** A form field as a string ('' when absent or not a string). */
function field(body: unknown, name: string): string {
  if (typeof body !== 'object' || body === null) return '';
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : '';
}

/** A browser's form post must come from this origin when the browser says where it comes from. */
function foreignOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  return origin !== undefined && origin !== publicBaseUrl(request);
}

const NOT_PENDING = htmlResponse(
  'No pending authorization for this code: unknown, expired or already decided.',
);
const TOO_MANY_CODES = htmlResponse('Too many codes entered: retry after `Retry-After` seconds.');

/** The verification page's routes, registered in the scope that parses form bodies (app.ts). */
export function registerDevicePage(forms: Api, { clients }: RouteDeps): void {
  /** The logged-in user behind the session cookie; undefined when none (or expired, logged out). */
  async function browserSession(request: FastifyRequest): Promise<BrowserSession | undefined> {
    const token = sessionCookieOf(request);
    if (!token || parseToken(token) !== 'userSession') return undefined;
    try {
      const res = await clients.admin.authenticate({ token, via: 'cookie' });
      if (!res.principal || !res.session || res.principal.kind !== PrincipalKind.USER_SESSION)
        return undefined;
      return { token, principal: res.principal, session: res.session };
    } catch (err) {
      if (err instanceof AppError && err.code === 'unauthenticated') return undefined;
      throw err;
    }
  }

  forms.get(
    VERIFICATION_PATH,
    {
      // The query may hold a user code: no access log line for this route (it would carry the URL).
      logLevel: 'warn',
      schema: {
        operationId: 'showDeviceVerification',
        summary: 'Device verification page (RFC 8628 `verification_uri`)',
        description:
          'HTML for browsers. Without a session cookie: a login form (posted to `/device/login`, same ' +
          'throttle as `POST /admin/v1/auth/login`; on success it sets the session cookie and redirects ' +
          '303 back here with the code kept). With one: the device and its code (`user_code` from the query, ' +
          'or a field to type it), when, from which IP address and with which client (`User-Agent`) the device ' +
          "started the request, a warning that approving gives that device the user's access, with Approve and Deny, posted to `POST /device` with the session's CSRF " +
          'token as a hidden field. `Cache-Control: no-store`, no framing, no referrer.',
        tags: ['auth'],
        querystring: Type.Object({
          user_code: Type.Optional(Type.String({ description: 'The code the device shows.' })),
        }),
        response: {
          200: htmlResponse('The login form, the code entry form, or the device to approve.'),
          400: htmlResponse('The code is not of the form XXXX-XXXX (the entry form again).'),
          404: NOT_PENDING,
          429: TOO_MANY_CODES,
        },
      },
    },
    async (request, reply) => {
      const userCode = request.query.user_code ?? '';
      const s = await browserSession(request);
      if (!s) return loginPage(request, reply, 200, { userCode });
      if (userCode === '') return page(reply, 200, devicePages.entry(s.session));
      let grant: Parameters<typeof devicePages.grant>[1];
      try {
        const res = await clients.admin.describeDeviceGrant({
          principal: s.principal,
          userCode,
          clientIp: request.ip,
        });
        grant = {
          clientId: res.clientId,
          userCode: res.userCode,
          expiresAt: iso(res.expiresAt),
          // Where and when the device asked: the user judges whether it was them.
          requestedAt: iso(res.requestedAt),
          requestedIp: res.requestedIp,
          requestedUserAgent: res.requestedUserAgent,
        };
      } catch (err) {
        return refusedCode(reply, err, s.session, userCode);
      }
      return page(reply, 200, devicePages.grant(s.session, grant, csrfTokenFor(s.token)));
    },
  );

  forms.post(
    VERIFICATION_PATH,
    {
      schema: {
        operationId: 'decideDeviceVerification',
        summary: 'Approve or deny from the verification page',
        description:
          "The verification page's form post (`application/x-www-form-urlencoded`: `user_code`, `action` " +
          '`approve` or `deny`, `csrf_token`), authenticated by the session cookie. Answers the result as ' +
          'HTML. A missing or wrong `csrf_token`, or an `Origin` other than this site: 403. For scripts, ' +
          '`POST /admin/v1/auth/device/approve` is the JSON equivalent.',
        tags: ['auth'],
        response: {
          200: htmlResponse('What happened: approved or denied.'),
          400: htmlResponse('No action, or a code that is not of the form XXXX-XXXX.'),
          401: htmlResponse('No (or an expired) session: the login form again.'),
          403: htmlResponse('Missing or wrong CSRF token, or a post from another site.'),
          404: NOT_PENDING,
          429: TOO_MANY_CODES,
        },
      },
    },
    async (request, reply) => {
      const userCode = field(request.body, 'user_code');
      if (foreignOrigin(request)) return page(reply, 403, devicePages.foreignOrigin);
      const s = await browserSession(request);
      if (!s)
        return loginPage(request, reply, 401, {
          userCode,
          message: 'Your session has ended: log in again.',
        });
      if (!csrfMatches(field(request.body, 'csrf_token'), csrfTokenFor(s.token))) {
        return page(reply, 403, devicePages.staleForm);
      }
      const action = field(request.body, 'action');
      if (action !== 'approve' && action !== 'deny') {
        return page(
          reply,
          400,
          devicePages.entry(s.session, { userCode, message: 'Choose Approve or Deny.' }),
        );
      }
      let decided: { status: string; clientId: string };
      try {
        decided = await clients.admin.decideDeviceGrant({
          principal: s.principal,
          userCode,
          approve: action === 'approve',
          clientIp: request.ip,
          mfaCode: field(request.body, 'mfa_code'),
        });
      } catch (err) {
        return refusedCode(reply, err, s.session, userCode);
      }
      if (decided.status === 'approved') {
        return page(reply, 200, devicePages.approved(s.session, decided.clientId));
      }
      return page(reply, 200, devicePages.denied(decided.clientId));
    },
  );

  forms.post(
    VERIFICATION_LOGIN_PATH,
    {
      schema: {
        // The login form's target: its only success is a 303 back to GET /device, whose
        // description documents it. Not an API operation.
        hide: true,
        tags: ['auth'],
      },
    },
    async (request, reply) => {
      const userCode = field(request.body, 'user_code');
      const email = field(request.body, 'email');
      const password = field(request.body, 'password');
      if (foreignOrigin(request)) return page(reply, 403, devicePages.foreignOrigin);
      if (!loginCsrfMatches(request, field(request.body, 'login_csrf'))) {
        // Login CSRF: a form from elsewhere, or an old one. A fresh form lets a real user retry.
        return loginPage(request, reply, 403, {
          userCode,
          email,
          message: 'This login form expired or was not sent from this site: log in again.',
        });
      }
      if (email.trim() === '' || password === '') {
        return loginPage(request, reply, 400, {
          userCode,
          email,
          message: 'Enter your email and password.',
        });
      }
      const mfaCode = field(request.body, 'mfa_code');
      const deviceToken = deviceCookieOf(request) ?? '';
      let login: { token: string; expiresAt: string | undefined; deviceToken: string };
      try {
        const res = await loginWithOptionalCode(clients.admin, {
          email,
          password,
          code: mfaCode,
          clientIp: request.ip,
          deviceToken,
        });
        // A user with a second factor: the page's code field is the second step.
        if (!res.signedIn) {
          return loginPage(request, reply, 401, {
            userCode,
            email,
            message:
              'This account has two-factor authentication: enter the password and the code from your authenticator app.',
          });
        }
        login = { token: res.token, expiresAt: iso(res.session?.expiresAt), deviceToken: res.deviceToken };
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        if (err.code === 'unauthenticated' || err.code === 'invalid_request' || err.code === 'rate_limited') {
          return loginPage(request, withRetryAfter(reply, err), err.httpStatus, {
            userCode,
            email,
            message: err.message,
          });
        }
        throw err;
      }
      setSessionCookie(request, reply, login.token, required(login.expiresAt, 'login.session.expires_at'));
      setDeviceCookie(request, reply, login.deviceToken);
      const back =
        userCode === ''
          ? VERIFICATION_PATH
          : `${VERIFICATION_PATH}?user_code=${encodeURIComponent(userCode)}`;
      return reply
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .redirect(back, 303);
    },
  );
}
