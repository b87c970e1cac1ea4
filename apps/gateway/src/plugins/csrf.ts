import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { AppError } from '@relayplane/contract/errors';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isHttps } from './security-headers.ts';

/** The session cookie login sets over plain HTTP: the same `rpu_` token the body answers. */
export const SESSION_COOKIE = 'rp_session';
/**
 * Its name over HTTPS. Browsers accept a `__Host-` cookie only with `Secure`, `Path=/` and no
 * `Domain`, and only from a secure origin: a sibling subdomain or a plain-HTTP response cannot
 * set or overwrite it (no session fixation, no cookie tossing).
 */
export const SECURE_SESSION_COOKIE = '__Host-rp_session';
const CSRF_HEADER = 'x-csrf-token';
export const CSRF_REFUSED_MESSAGE = 'missing or invalid CSRF token';

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The session cookie's name for a request: `__Host-rp_session` over HTTPS, `rp_session` over
 * plain HTTP. Only that name is read: over HTTPS a plain `rp_session` (which anyone able to set
 * a cookie for the host could have planted) is ignored.
 */
export function sessionCookieName(request: FastifyRequest): string {
  return isHttps(request) ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
}

function cookiesOf(request: FastifyRequest): Record<string, string | undefined> | undefined {
  const header = request.headers.cookie;
  if (header === undefined || header === '') return undefined;
  return request.server.parseCookie(header);
}

/**
 * The session cookie of a request, parsed on demand: only session routes read it, so the hot
 * paths (credentials, JWKS) never parse a Cookie header (@fastify/cookie runs with `hook: false`).
 */
export function sessionCookieOf(request: FastifyRequest): string | undefined {
  return cookiesOf(request)?.[sessionCookieName(request)];
}

export function isStateChanging(method: string): boolean {
  return STATE_CHANGING.has(method.toUpperCase());
}

/**
 * The CSRF token of a session, derived rather than stored: HMAC-SHA256 keyed by the session
 * token. Whoever can compute it already holds the session token; a cross-site page can neither
 * read the HttpOnly cookie nor a same-origin response, so it cannot learn it.
 */
export function csrfTokenFor(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('relayplane-csrf').digest('base64url');
}

/** Whether a sent CSRF token equals the expected one, compared in constant time. */
export function csrfMatches(sent: unknown, expected: string): boolean {
  if (typeof sent !== 'string') return false;
  const a = Buffer.from(sent);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A cookie-authenticated state-changing request must carry the session's CSRF token: else 403. */
export function requireCsrf(request: FastifyRequest, sessionToken: string): void {
  if (!isStateChanging(request.method)) return;
  if (!csrfMatches(request.headers[CSRF_HEADER], csrfTokenFor(sessionToken))) {
    throw new AppError('forbidden', CSRF_REFUSED_MESSAGE);
  }
}

/**
 * Login CSRF on a server-rendered login form (no session yet to derive a token from): a random
 * token in a SameSite=Strict cookie and in the form, which must match (double submit). A
 * cross-site form post cannot send the cookie, nor read the page to learn the field.
 */
const LOGIN_CSRF_COOKIE = 'rp_login_csrf';

export function issueLoginCsrf(request: FastifyRequest, reply: FastifyReply, path: string): string {
  const token = randomBytes(32).toString('base64url');
  reply.setCookie(LOGIN_CSRF_COOKIE, token, { ...cookieOptions(request, 1800), path });
  return token;
}

export function loginCsrfMatches(request: FastifyRequest, sent: unknown): boolean {
  const header = request.headers.cookie;
  const expected = header ? request.server.parseCookie(header)[LOGIN_CSRF_COOKIE] : undefined;
  return expected !== undefined && expected !== '' && csrfMatches(sent, expected);
}

/**
 * `HttpOnly` (scripts cannot read it), `SameSite=Strict` (browsers do not send it on any
 * cross-site request, navigations included: the cookie only serves the API and the admin UI of
 * the same site, so nothing legitimate needs it cross-site), `Path=/`, no `Domain`, `Max-Age` =
 * the time left of the session. Over HTTPS (`X-Forwarded-Proto` believed from trusted proxies
 * only) it is `__Host-rp_session` and `Secure`; over plain HTTP `rp_session`.
 */
export function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  expiresAt: string,
): void {
  const maxAge = Math.max(0, Math.floor((Date.parse(expiresAt) - Date.now()) / 1000));
  reply.setCookie(sessionCookieName(request), token, cookieOptions(request, maxAge));
  clearLegacySessionCookie(request, reply);
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  reply.setCookie(sessionCookieName(request), '', cookieOptions(request, 0));
  clearLegacySessionCookie(request, reply);
}

/**
 * Over HTTPS, a plain `rp_session` the browser still sends (set before the gateway named it
 * `__Host-`) is never read again: it is expired, so it does not linger until its Max-Age.
 */
function clearLegacySessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  if (isHttps(request) && cookiesOf(request)?.[SESSION_COOKIE] !== undefined) {
    reply.setCookie(SESSION_COOKIE, '', cookieOptions(request, 0));
  }
}

function cookieOptions(request: FastifyRequest, maxAge: number) {
  return {
    httpOnly: true,
    sameSite: 'strict' as const,
    path: '/',
    secure: isHttps(request),
    maxAge,
  };
}

/**
 * The device cookie (docs/iam.md, "Login throttling"): the signed device token admin answers on a
 * successful login, kept by the browser so its later logins count against its own limit and are
 * never refused by the account-wide one. `__Host-rp_device` over HTTPS, `rp_device` over HTTP;
 * HttpOnly, SameSite=Strict, 180 days (the token's own life).
 */
export const DEVICE_COOKIE = 'rp_device';
export const SECURE_DEVICE_COOKIE = '__Host-rp_device';
const DEVICE_COOKIE_MAX_AGE_SECONDS = 180 * 24 * 60 * 60;

function deviceCookieName(request: FastifyRequest): string {
  return isHttps(request) ? SECURE_DEVICE_COOKIE : DEVICE_COOKIE;
}

export function deviceCookieOf(request: FastifyRequest): string | undefined {
  return cookiesOf(request)?.[deviceCookieName(request)];
}

export function setDeviceCookie(request: FastifyRequest, reply: FastifyReply, deviceToken: string): void {
  if (deviceToken === '') return;
  reply.setCookie(
    deviceCookieName(request),
    deviceToken,
    cookieOptions(request, DEVICE_COOKIE_MAX_AGE_SECONDS),
  );
}
