/**
 * Response headers every route gets without asking for them (docs/security.md):
 *
 * - `Cache-Control: no-store` on every response whose route did not set its own Cache-Control.
 *   Secrets (session, CLI, bot, identity and relay tokens, API keys, credentials) are answered
 *   by many routes; a default that each new route inherits cannot be forgotten. Routes that are
 *   meant to be cached say so (JWKS, plans and pricing, the OAuth metadata, the docs' static
 *   assets) and keep theirs.
 * - On every `text/html` response without a Content-Security-Policy of its own: one with
 *   `frame-ancestors 'none'` (the docs UI gets the policy it needs to run; the gateway's own pages
 *   set the stricter one in html.ts), plus `X-Frame-Options: DENY` and `nosniff`.
 * - Over HTTPS (TLS in front of the gateway, told by `X-Forwarded-Proto` from a trusted proxy;
 *   never believed from any other peer): `Strict-Transport-Security`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { PAGE_CSP } from '../html.ts';

/** One year, this host and its subdomains; not `preload` (that is the operator's choice to make). */
export const HSTS = 'max-age=31536000; includeSubDomains';

/** Where the Swagger UI is served (openapi.ts). */
export const DOCS_PREFIX = '/docs';

/**
 * The Swagger UI: its scripts, styles and images come from this gateway (styles may be inline,
 * images data: URIs), it fetches the document from here and may try operations against this
 * gateway only; nothing can frame it.
 */
export const DOCS_CSP =
  "default-src 'self'; script-src 'self'; script-src-attr 'none'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; " +
  "form-action 'self'; frame-ancestors 'none'";

/**
 * Whether the request reached us over HTTPS. The gateway serves plain HTTP; TLS is terminated in
 * front of it, and Fastify believes `X-Forwarded-Proto` only from `GATEWAY_TRUSTED_PROXIES`
 * (anyone else's header is ignored: the socket is not encrypted, so `http`).
 */
export function isHttps(request: FastifyRequest): boolean {
  return request.protocol === 'https';
}

function isDocs(url: string): boolean {
  return url === DOCS_PREFIX || url.startsWith(`${DOCS_PREFIX}/`) || url.startsWith(`${DOCS_PREFIX}?`);
}

/** Registered on the root instance before any route, so every route and plugin inherits it. */
export function registerSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    if (isHttps(request)) reply.header('strict-transport-security', HSTS);
    const type = reply.getHeader('content-type');
    if (
      typeof type === 'string' &&
      type.toLowerCase().startsWith('text/html') &&
      !reply.hasHeader('content-security-policy')
    ) {
      reply
        .header('content-security-policy', isDocs(request.url) ? DOCS_CSP : PAGE_CSP)
        .header('x-frame-options', 'DENY')
        .header('x-content-type-options', 'nosniff');
    }
    done(null, payload);
  });
}
