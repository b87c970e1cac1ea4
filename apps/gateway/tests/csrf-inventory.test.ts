import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServedRoute } from '../src/app.ts';
import { OWNER, type Stack, startStack } from './support/stack.ts';

const CSRF_REFUSED = { error: 'missing or invalid CSRF token' };
const STATE_CHANGING = ['POST', 'PUT', 'PATCH', 'DELETE'];

/** Path parameters get an id that exists nowhere: the guard answers before any lookup. */
const concrete = (url: string) => url.replace(/:([A-Za-z_]+)/g, 'xxx_00000000000000000000');
const key = (r: ServedRoute) => `${r.method} ${r.url}`;

/**
 * The inventory comes from the routes the app serves and the guard each one runs (`userSession`
 * is set from the route's `onRequest` guard), not from a hand-kept list: a new route that
 * accepts a session is covered the moment it is registered.
 */
describe('CSRF protection of every cookie-authenticated state-changing route', () => {
  let stack: Stack;
  let cookie: { cookie: string };
  let doc: {
    paths: Record<
      string,
      Record<
        string,
        { security?: Record<string, unknown>[]; responses: Record<string, { description?: string }> }
      >
    >;
  };
  beforeAll(async () => {
    stack = await startStack('gw_csrf_inventory');
    const login = await stack.app.inject({ method: 'POST', url: '/admin/v1/auth/login', payload: OWNER });
    expect(login.statusCode).toBe(200);
    cookie = { cookie: `rp_session=${login.json().token}` };
    doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  });
  afterAll(async () => {
    await stack?.close();
  });

  const sessionWrites = () => stack.routes.filter((r) => r.userSession && STATE_CHANGING.includes(r.method));

  it('the enumerated set is non-empty and includes POST /admin/v1/projects', () => {
    const keys = sessionWrites().map(key);
    expect(keys.length).toBeGreaterThan(5);
    expect(keys).toContain('POST /admin/v1/projects');
    expect(keys).toContain('POST /admin/v1/auth/logout');
  });

  it('every one refuses a cookie-authenticated request without X-CSRF-Token with 403', async () => {
    const answers: Record<string, unknown> = {};
    for (const route of sessionWrites()) {
      const res = await stack.app.inject({
        method: route.method as 'POST',
        url: concrete(route.url),
        headers: cookie,
      });
      answers[key(route)] = { status: res.statusCode, body: res.json() };
    }
    expect(answers).toEqual(
      Object.fromEntries(sessionWrites().map((r) => [key(r), { status: 403, body: CSRF_REFUSED }])),
    );
  });

  it('every one refuses a wrong X-CSRF-Token with 403', async () => {
    for (const route of sessionWrites()) {
      const res = await stack.app.inject({
        method: route.method as 'POST',
        url: concrete(route.url),
        headers: { ...cookie, 'x-csrf-token': 'A'.repeat(43) },
      });
      expect(res.statusCode, key(route)).toBe(403);
      expect(res.json(), key(route)).toEqual(CSRF_REFUSED);
    }
  });

  it('no other route answers the CSRF refusal: the guard is the only place a cookie authenticates', async () => {
    const refusing: string[] = [];
    for (const route of stack.routes) {
      const res = await stack.app.inject({
        method: route.method as 'GET',
        url: concrete(route.url),
        headers: cookie,
      });
      if (res.statusCode === 403 && res.body === JSON.stringify(CSRF_REFUSED)) refusing.push(key(route));
    }
    expect(refusing.sort()).toEqual(sessionWrites().map(key).sort());
  });

  it('the OpenAPI document offers the cookie on every session route and documents the CSRF 403 on writes', () => {
    for (const route of stack.routes.filter((r) => r.userSession)) {
      const op = doc.paths[route.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[route.method.toLowerCase()];
      expect(op, key(route)).toBeDefined();
      expect(op?.security, key(route)).toEqual(
        expect.arrayContaining([{ bearerAuth: [] }, { cookieAuth: [] }]),
      );
      if (STATE_CHANGING.includes(route.method)) {
        expect(op?.responses['403']?.description, key(route)).toMatch(/X-CSRF-Token/);
      }
    }
    for (const route of stack.routes.filter((r) => r.documented && !r.userSession)) {
      const op = doc.paths[route.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[route.method.toLowerCase()];
      expect(op?.security ?? [], key(route)).not.toContainEqual({ cookieAuth: [] });
    }
  });
});
