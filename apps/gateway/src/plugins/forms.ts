/**
 * `application/x-www-form-urlencoded` bodies, for the few routes that take them: the OAuth
 * device-flow endpoints (what OAuth clients send), RFC 7662 introspection, and the HTML pages'
 * form posts. app.ts registers them all in one scope with this parser; every other route stays
 * JSON only (415).
 */
import type { FastifyInstance } from 'fastify';

/**
 * `a=1&b=2` → `{a: '1', b: '2'}`. A repeated parameter becomes an array, which the string-typed
 * schemas refuse (RFC 6749 §3.2: parameters must not be repeated). `Object.fromEntries` defines
 * own properties, so `__proto__=…` is just a (refused) parameter, never a prototype.
 */
function parseForm(body: string): Record<string, string | string[]> {
  const entries = new Map<string, string | string[]>();
  for (const [key, value] of new URLSearchParams(body)) {
    const seen = entries.get(key);
    entries.set(key, seen === undefined ? value : [...[seen].flat(), value]);
  }
  return Object.fromEntries(entries);
}

/** Registers the form parser in (only) the scope it is called on. */
export function acceptForms(scope: FastifyInstance): void {
  scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) =>
    done(null, parseForm(body as string)),
  );
}
