/**
 * The request as access log lines show it (`incoming request`, and with a 5xx): Fastify's fields,
 * with capability URLs cut (docs/security.md). A built-in checkout page's URL is the checkout
 * session id, and whoever holds it can confirm the plan change: log readers must not. The same
 * for a device's user code in the verification page's query.
 */
import type { Logger } from '@relayplane/shared/logger';
import type { FastifyRequest } from 'fastify';
import { CHECKOUT_PATH } from '../html.ts';

export const REDACTED = '[redacted]';

/** `/billing/checkout/<id>` and anything under it, any letter case (the router is case-sensitive, but the log must not care). */
const CHECKOUT_URL = new RegExp(`^(${CHECKOUT_PATH.replaceAll('/', '\\/')}\\/)[^?#]*`, 'i');
/** `user_code=…` in a query string. */
const USER_CODE = /([?&]user_code=)[^&#]*/gi;

/** A URL as it may be logged: capabilities replaced by `[redacted]`. */
export function loggableUrl(url: string): string {
  return url.replace(CHECKOUT_URL, `$1${REDACTED}`).replace(USER_CODE, `$1${REDACTED}`);
}

/** Fastify's `req` serializer (method, url, version, host, address, port), with the URL made loggable. */
function serializeRequest(request: FastifyRequest) {
  return {
    method: request.method,
    url: loggableUrl(request.url),
    version: request.headers?.['accept-version'],
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/** The logger the HTTP server logs through: the service's, with the serializer above. */
export function accessLogger(logger: Logger): Logger {
  return logger.child({}, { serializers: { req: serializeRequest } });
}
