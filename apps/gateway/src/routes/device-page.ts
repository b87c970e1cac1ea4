/**
 * The RFC 8628 verification page (`/device`): server-rendered HTML, no script. Not logged in:
 * a login form that logs in through admin's Login (same throttle) and sets the session cookie
 * like `POST /admin/v1/auth/login`, then comes back with the code kept. Logged in: the code and
 * the client, with Approve and Deny. Form posts carry the session's CSRF token as a hidden field,
 * checked like `X-CSRF-Token`; posts from another origin are refused as well.
 */
import { type Principal, PrincipalKind, type Session } from '@relayplane/proto/admin';
import { AppError } from '@relayplane/shared/errors';
import { parseToken } from '@relayplane/shared/tokens';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  csrfMatches,
  csrfTokenFor,
  issueLoginCsrf,
  loginCsrfMatches,
  sessionCookieOf,
  setSessionCookie,
} from '../plugins/csrf.ts';
import { iso } from '../present.ts';
import { publicBaseUrl } from '../public-url.ts';
import { COMMON_ERRORS } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { acceptForms, VERIFICATION_PATH } from './device-common.ts';

const LOGIN_PATH = `${VERIFICATION_PATH}/login`;

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const html = (description: string) => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
});

function page(reply: FastifyReply, status: number, title: string, body: string): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header('x-content-type-options', 'nosniff')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
        '<meta name="viewport" content="width=device-width,initial-scale=1">' +
        `<title>${escapeHtml(title)}</title>` +
        '<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}' +
        'label{display:block;margin:.75rem 0}input{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box}' +
        'button{font-size:1rem;padding:.5rem 1rem;margin-right:.5rem}.code{font:700 2rem monospace;letter-spacing:.2rem}' +
        '.error{color:#a00}</style></head>' +
        `<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`,
    );
}

const hidden = (name: string, value: string) =>
  `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;
const notice = (message: string | undefined) =>
  message ? `<p class="error" role="alert">${escapeHtml(message)}</p>` : '';

function loginPage(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  form: { userCode: string; email?: string; message?: string },
): FastifyReply {
  const loginCsrf = issueLoginCsrf(request, reply, VERIFICATION_PATH);
  return page(
    reply,
    status,
    'Log in to connect a device',
    notice(form.message) +
      '<p>A device is asking to access Relayplane. Log in to review it.</p>' +
      `<form method="post" action="${LOGIN_PATH}">` +
      `<label>Email <input type="email" name="email" autocomplete="username" required value="${escapeHtml(form.email ?? '')}"></label>` +
      '<label>Password <input type="password" name="password" autocomplete="current-password" required></label>' +
      hidden('user_code', form.userCode) +
      hidden('login_csrf', loginCsrf) +
      '<button type="submit">Log in</button></form>',
  );
}

function entryPage(
  reply: FastifyReply,
  status: number,
  session: Session,
  form: { userCode?: string; message?: string } = {},
): FastifyReply {
  return page(
    reply,
    status,
    'Connect a device',
    notice(form.message) +
      `<p>Logged in as <b>${escapeHtml(session.user?.email ?? '')}</b> in tenant <b>${escapeHtml(session.tenant?.name ?? '')}</b>.</p>` +
      `<form method="get" action="${VERIFICATION_PATH}">` +
      `<label>Code shown on your device <input name="user_code" autocomplete="off" autocapitalize="characters" placeholder="XXXX-XXXX" required value="${escapeHtml(form.userCode ?? '')}"></label>` +
      '<button type="submit">Continue</button></form>',
  );
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

const FOREIGN_ORIGIN_BODY =
  '<p class="error">This form was not sent from this site. Open the page again and retry.</p>';

export function registerDevicePage(app: FastifyInstance, { clients }: RouteDeps): void {
  /** The logged-in user behind the session cookie; undefined when none (or expired, logged out). */
  async function browserSession(request: FastifyRequest): Promise<BrowserSession | undefined> {
    const token = sessionCookieOf(request);
    if (!token || parseToken(token) !== 'userSession') return undefined;
    try {
      const res = await clients.admin.authenticate({ token });
      if (!res.principal || !res.session || res.principal.kind !== PrincipalKind.USER_SESSION)
        return undefined;
      return { token, principal: res.principal, session: res.session };
    } catch (err) {
      if (err instanceof AppError && err.code === 'unauthenticated') return undefined;
      throw err;
    }
  }

  app.register(async (scope) => {
    acceptForms(scope);

    scope.get<{ Querystring: { user_code?: string } }>(
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
            "or a field to type it) with Approve and Deny, posted to `POST /device` with the session's CSRF " +
            'token as a hidden field. `Cache-Control: no-store`, no framing, no referrer.',
          tags: ['auth'],
          security: [],
          querystring: {
            type: 'object',
            properties: { user_code: { type: 'string', description: 'The code the device shows.' } },
          },
          response: {
            200: html('The login form, the code entry form, or the device to approve.'),
            400: html('The code is not of the form XXXX-XXXX (the entry form again).'),
            404: html('No pending authorization for this code: unknown, expired or already decided.'),
            429: html('Too many codes entered: retry after `Retry-After` seconds.'),
            ...COMMON_ERRORS,
          },
        },
      },
      async (request, reply) => {
        const userCode = request.query.user_code ?? '';
        const s = await browserSession(request);
        if (!s) return loginPage(request, reply, 200, { userCode });
        if (userCode === '') return entryPage(reply, 200, s.session);
        let grant: { clientId: string; userCode: string; expiresAt: string | undefined };
        try {
          const res = await clients.admin.describeDeviceGrant({
            principal: s.principal,
            userCode,
            clientIp: request.ip,
          });
          grant = { clientId: res.clientId, userCode: res.userCode, expiresAt: iso(res.expiresAt) };
        } catch (err) {
          const e = shown(err);
          if (!e) throw err;
          return entryPage(withRetryAfter(reply, e), e.httpStatus, s.session, {
            userCode,
            message: e.message,
          });
        }
        return page(
          reply,
          200,
          'Connect a device',
          `<p>The application <b>${escapeHtml(grant.clientId)}</b> is asking to act as ` +
            `<b>${escapeHtml(s.session.user?.email ?? '')}</b> in tenant <b>${escapeHtml(s.session.tenant?.name ?? '')}</b>.</p>` +
            '<p>Check that your device shows this code:</p>' +
            `<p class="code">${escapeHtml(grant.userCode)}</p>` +
            (grant.expiresAt ? `<p>The code expires at ${escapeHtml(grant.expiresAt)}.</p>` : '') +
            `<form method="post" action="${VERIFICATION_PATH}">` +
            hidden('user_code', grant.userCode) +
            hidden('csrf_token', csrfTokenFor(s.token)) +
            '<button type="submit" name="action" value="approve">Approve</button>' +
            '<button type="submit" name="action" value="deny">Deny</button></form>' +
            '<p>Only approve a device you started signing in yourself.</p>',
        );
      },
    );

    scope.post(
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
          security: [],
          response: {
            200: html('What happened: approved or denied.'),
            400: html('No action, or a code that is not of the form XXXX-XXXX.'),
            401: html('No (or an expired) session: the login form again.'),
            403: html('Missing or wrong CSRF token, or a post from another site.'),
            404: html('No pending authorization for this code: unknown, expired or already decided.'),
            429: html('Too many codes entered: retry after `Retry-After` seconds.'),
            ...COMMON_ERRORS,
          },
        },
      },
      async (request, reply) => {
        const userCode = field(request.body, 'user_code');
        if (foreignOrigin(request)) return page(reply, 403, 'Request refused', FOREIGN_ORIGIN_BODY);
        const s = await browserSession(request);
        if (!s)
          return loginPage(request, reply, 401, {
            userCode,
            message: 'Your session has ended: log in again.',
          });
        if (!csrfMatches(field(request.body, 'csrf_token'), csrfTokenFor(s.token))) {
          return page(
            reply,
            403,
            'Request refused',
            '<p class="error">This form has expired or was not sent from this page. ' +
              `<a href="${VERIFICATION_PATH}">Open the page again</a> and retry.</p>`,
          );
        }
        const action = field(request.body, 'action');
        if (action !== 'approve' && action !== 'deny') {
          return entryPage(reply, 400, s.session, { userCode, message: 'Choose Approve or Deny.' });
        }
        let decided: { status: string; clientId: string };
        try {
          decided = await clients.admin.decideDeviceGrant({
            principal: s.principal,
            userCode,
            approve: action === 'approve',
            clientIp: request.ip,
          });
        } catch (err) {
          const e = shown(err);
          if (!e) throw err;
          return entryPage(withRetryAfter(reply, e), e.httpStatus, s.session, {
            userCode,
            message: e.message,
          });
        }
        if (decided.status === 'approved') {
          return page(
            reply,
            200,
            'Device approved',
            `<p><b>${escapeHtml(decided.clientId)}</b> can now act as <b>${escapeHtml(s.session.user?.email ?? '')}</b> ` +
              `in tenant <b>${escapeHtml(s.session.tenant?.name ?? '')}</b>. You can close this page and return to your device.</p>`,
          );
        }
        return page(
          reply,
          200,
          'Request denied',
          `<p>The device was not given access. <b>${escapeHtml(decided.clientId)}</b> will be told it was denied.</p>`,
        );
      },
    );

    scope.post(
      LOGIN_PATH,
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
        if (foreignOrigin(request)) return page(reply, 403, 'Request refused', FOREIGN_ORIGIN_BODY);
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
        let login: { token: string; expiresAt: string | undefined };
        try {
          const res = await clients.admin.login({ email, password, clientIp: request.ip });
          login = { token: res.token, expiresAt: iso(res.session?.expiresAt) };
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          if (
            err.code === 'unauthenticated' ||
            err.code === 'invalid_request' ||
            err.code === 'rate_limited'
          ) {
            return loginPage(request, withRetryAfter(reply, err), err.httpStatus, {
              userCode,
              email,
              message: err.message,
            });
          }
          throw err;
        }
        if (!login.expiresAt) throw new AppError('internal', 'login returned no session');
        setSessionCookie(request, reply, login.token, login.expiresAt);
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
  });
}
