/** What the device-flow routes and the verification page share. */
import type { FastifyInstance } from 'fastify';

export const DEVICE_GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:device_code';
export const DEVICE_CODE_PATH = '/admin/v1/auth/device/code';
export const TOKEN_PATH = '/admin/v1/auth/token';
export const VERIFICATION_PATH = '/device';
export const METADATA_PATH = '/.well-known/oauth-authorization-server';

/**
 * `a=1&b=2` → `{a: '1', b: '2'}`. A repeated parameter becomes an array, which the schema
 * refuses (RFC 6749 §3.2: parameters must not be repeated). `Object.fromEntries` defines own
 * properties, so `__proto__=…` is just a (refused) parameter, never a prototype.
 */
function parseForm(body: string): Record<string, string | string[]> {
  const entries = new Map<string, string | string[]>();
  for (const [key, value] of new URLSearchParams(body)) {
    const seen = entries.get(key);
    entries.set(key, seen === undefined ? value : [...[seen].flat(), value]);
  }
  return Object.fromEntries(entries);
}

/** Registers the urlencoded parser in (only) the scope it is called on. */
export function acceptForms(scope: FastifyInstance): void {
  scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) =>
    done(null, parseForm(body as string)),
  );
}
