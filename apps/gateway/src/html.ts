/**
 * The gateway's HTML pages: the built-in billing provider's checkout page and the RFC 8628
 * verification page (`/device`). Server-rendered, no script; every page goes out through
 * `page()`, with one set of security headers:
 *
 * - `Cache-Control: no-store`: pages show sessions, codes and CSRF tokens.
 * - `Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; form-action 'self';
 *   frame-ancestors 'none'; base-uri 'none'`: nothing loads but the inline style, forms post
 *   only here, no page can be framed (clickjacking an Approve or Confirm button) or re-based.
 * - `X-Frame-Options: DENY`: the same framing rule for browsers without `frame-ancestors`.
 * - `Referrer-Policy: no-referrer`: a verification URL carries the user code.
 * - `X-Content-Type-Options: nosniff`.
 *
 * This is the union of what the two kinds of page sent before they shared this module (the
 * checkout page lacked `frame-ancestors`, `base-uri`, the referrer policy and `nosniff`): the
 * strictest set that every page already works under. An HTML answer that does not go through
 * `page()` still gets the policy, `X-Frame-Options` and `no-store` from
 * plugins/security-headers.ts (docs/security.md).
 */
import type { Session } from '@relayplane/proto/admin';
import type { FastifyReply } from 'fastify';

export const VERIFICATION_PATH = '/device';
/** The verification page's login form target. */
export const VERIFICATION_LOGIN_PATH = `${VERIFICATION_PATH}/login`;
/** `<path>/<session id>`: the built-in provider's checkout page. */
export const CHECKOUT_PATH = '/billing/checkout';

/**
 * The pages' policy; also what plugins/security-headers.ts gives any other `text/html` answer
 * that comes without a policy of its own.
 */
export const PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy': PAGE_CSP,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
} as const;

const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}' +
  'label{display:block;margin:.75rem 0}input{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box}' +
  'button{font-size:1rem;padding:.5rem 1rem;margin-right:.5rem}.code{font:700 2rem monospace;letter-spacing:.2rem}' +
  '.error{color:#a00}';

export interface Page {
  title: string;
  /** HTML, with every value in it escaped. */
  body: string;
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Sends `content` as a complete page with the security headers above. */
export function page(reply: FastifyReply, status: number, content: Page): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .headers(SECURITY_HEADERS)
    .send(
      '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
        '<meta name="viewport" content="width=device-width,initial-scale=1">' +
        `<title>${escapeHtml(content.title)}</title><style>${STYLE}</style></head>` +
        `<body><h1>${escapeHtml(content.title)}</h1>${content.body}</body></html>`,
    );
}

const b = (s: string) => `<b>${escapeHtml(s)}</b>`;
const hidden = (name: string, value: string) =>
  `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;
const notice = (message: string | undefined) =>
  message ? `<p class="error" role="alert">${escapeHtml(message)}</p>` : '';

export const checkoutPages = {
  unknown: { title: 'Checkout not found', body: '<p>This checkout link is unknown.</p>' },
  unknownOrExpired: {
    title: 'Checkout not found',
    body: '<p>This checkout link is unknown or has expired.</p>',
  },
  expired: { title: 'Checkout expired', body: '<p>This checkout link has expired. Start a new one.</p>' },
  confirm: (sessionId: string, plan: string): Page => ({
    title: 'Confirm plan change',
    body:
      `<p>Change the plan to ${b(plan)}?</p>` +
      `<form method="post" action="${CHECKOUT_PATH}/${encodeURIComponent(sessionId)}">` +
      '<button type="submit">Confirm</button></form>',
  }),
  /** A completed session, looked at again. */
  changed: (plan: string): Page => ({
    title: 'Plan changed',
    body: `<p>The tenant is on the ${b(plan)} plan.</p>`,
  }),
  /** The answer to the confirmation. */
  changedNow: (plan: string): Page => ({
    title: 'Plan changed',
    body: `<p>The tenant is now on the ${b(plan)} plan.</p>`,
  }),
  /** Billing refused the confirmation (`unprocessable`): a paid plan while paid built-in checkout is off. */
  paidCheckoutOff: {
    title: 'Checkout not available',
    body:
      '<p>This plan is paid, and this deployment does not confirm paid plans through the built-in ' +
      'provider (it takes no payment; the operator setting is <code>BILLING_BUILTIN_PAID_CHECKOUT</code>). ' +
      'A platform admin can set the plan.</p>',
  },
} as const;

/** Who is logged in, as the verification page names them. */
function loggedIn(session: Session): { email: string; tenant: string } {
  return { email: session.user?.email ?? '', tenant: session.tenant?.name ?? '' };
}

export const devicePages = {
  login: (form: { userCode: string; loginCsrf: string; email?: string; message?: string }): Page => ({
    title: 'Log in to connect a device',
    body:
      notice(form.message) +
      '<p>A device is asking to access Relayplane. Log in to review it.</p>' +
      `<form method="post" action="${VERIFICATION_LOGIN_PATH}">` +
      `<label>Email <input type="email" name="email" autocomplete="username" required value="${escapeHtml(form.email ?? '')}"></label>` +
      '<label>Password <input type="password" name="password" autocomplete="current-password" required></label>' +
      '<label>Authenticator code (only if you have set up two-factor authentication) ' +
      '<input name="mfa_code" inputmode="numeric" autocomplete="one-time-code" maxlength="64"></label>' +
      hidden('user_code', form.userCode) +
      hidden('login_csrf', form.loginCsrf) +
      '<button type="submit">Log in</button></form>',
  }),

  /** The field to type the code shown on the device. */
  entry: (session: Session, form: { userCode?: string; message?: string } = {}): Page => {
    const who = loggedIn(session);
    return {
      title: 'Connect a device',
      body:
        notice(form.message) +
        `<p>Logged in as ${b(who.email)} in tenant ${b(who.tenant)}.</p>` +
        `<form method="get" action="${VERIFICATION_PATH}">` +
        `<label>Code shown on your device <input name="user_code" autocomplete="off" autocapitalize="characters" placeholder="XXXX-XXXX" required value="${escapeHtml(form.userCode ?? '')}"></label>` +
        '<button type="submit">Continue</button></form>',
    };
  },

  /**
   * The device asking, with where and when it asked (the request that started the flow), the
   * warning of what approving gives, and Approve and Deny.
   */
  grant: (
    session: Session,
    grant: {
      clientId: string;
      userCode: string;
      expiresAt: string | undefined;
      requestedAt: string | undefined;
      requestedIp: string;
      requestedUserAgent: string;
    },
    csrfToken: string,
  ): Page => {
    const who = loggedIn(session);
    const unknown = '<i>unknown</i>';
    return {
      title: 'Connect a device',
      body:
        `<p>The application ${b(grant.clientId)} is asking to act as ` +
        `${b(who.email)} in tenant ${b(who.tenant)}.</p>` +
        '<p>The request was started:</p><ul>' +
        `<li>at ${grant.requestedAt ? b(grant.requestedAt) : unknown}</li>` +
        `<li>from IP address ${grant.requestedIp ? b(grant.requestedIp) : unknown}</li>` +
        `<li>by the client ${grant.requestedUserAgent ? b(grant.requestedUserAgent) : unknown}</li></ul>` +
        '<p class="error" role="alert"><b>Approving gives that device your access</b>: it can do everything ' +
        `you can do in tenant ${b(who.tenant)}, until you end it from your sessions or it expires. ` +
        'If you did not start this yourself, or the place or time is not yours, choose Deny.</p>' +
        '<p>Check that your device shows this code:</p>' +
        `<p class="code">${escapeHtml(grant.userCode)}</p>` +
        (grant.expiresAt ? `<p>The code expires at ${escapeHtml(grant.expiresAt)}.</p>` : '') +
        `<form method="post" action="${VERIFICATION_PATH}">` +
        hidden('user_code', grant.userCode) +
        hidden('csrf_token', csrfToken) +
        '<label>Authenticator code (needed to approve if you have set up two-factor authentication) ' +
        '<input name="mfa_code" inputmode="numeric" autocomplete="one-time-code" maxlength="64"></label>' +
        '<button type="submit" name="action" value="approve">Approve</button>' +
        '<button type="submit" name="action" value="deny">Deny</button></form>' +
        '<p>Only approve a device you started signing in yourself.</p>',
    };
  },

  approved: (session: Session, clientId: string): Page => {
    const who = loggedIn(session);
    return {
      title: 'Device approved',
      body:
        `<p>${b(clientId)} can now act as ${b(who.email)} ` +
        `in tenant ${b(who.tenant)}. You can close this page and return to your device.</p>`,
    };
  },

  denied: (clientId: string): Page => ({
    title: 'Request denied',
    body: `<p>The device was not given access. ${b(clientId)} will be told it was denied.</p>`,
  }),

  /** A form post whose `Origin` is another site. */
  foreignOrigin: {
    title: 'Request refused',
    body: '<p class="error">This form was not sent from this site. Open the page again and retry.</p>',
  },

  /** A form post without the session's CSRF token. */
  staleForm: {
    title: 'Request refused',
    body:
      '<p class="error">This form has expired or was not sent from this page. ' +
      `<a href="${VERIFICATION_PATH}">Open the page again</a> and retry.</p>`,
  },
} as const;
