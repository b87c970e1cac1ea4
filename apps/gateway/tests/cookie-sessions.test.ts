import { ManualClock } from '@relayplane/shared/clock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER, type Stack, startStack } from './support/stack.ts';

const CSRF_REFUSED = { error: 'missing or invalid CSRF token' };

interface Login {
  token: string;
  csrf_token: string;
  expires_at: string;
  setCookie: string;
  cookie: { cookie: string };
}

/** Browser sessions: the login cookie authenticates, and state changes need the CSRF token. */
describe('gateway cookie sessions', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack('gw_cookie_sessions');
  });
  afterAll(async () => {
    await stack?.close();
  });

  async function login(): Promise<Login> {
    const res = await stack.app.inject({ method: 'POST', url: '/admin/v1/auth/login', payload: OWNER });
    expect(res.statusCode).toBe(200);
    const body = res.json<{ token: string; csrf_token: string; expires_at: string }>();
    const setCookie = String(res.headers['set-cookie']);
    const value = /^rp_session=([^;]*)/.exec(setCookie)?.[1] ?? '';
    return { ...body, setCookie, cookie: { cookie: `rp_session=${value}` } };
  }

  it('login sets an HttpOnly, SameSite=Strict session cookie for the session lifetime and answers a CSRF token', async () => {
    const session = await login();
    const attributes = session.setCookie.split(';').map((a) => a.trim());
    expect(attributes[0]).toBe(`rp_session=${session.token}`);
    expect(attributes).toContain('HttpOnly');
    expect(attributes).toContain('SameSite=Strict');
    expect(attributes).toContain('Path=/');
    expect(attributes).not.toContain('Secure');
    const maxAge = Number(attributes.find((a) => a.startsWith('Max-Age='))?.slice('Max-Age='.length));
    const lifetime = (Date.parse(session.expires_at) - Date.now()) / 1000;
    expect(maxAge).toBeGreaterThan(0);
    expect(Math.abs(maxAge - lifetime)).toBeLessThan(5);
    expect(session.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('the cookie is __Host-rp_session and Secure when the request came over HTTPS through a trusted proxy', async () => {
    const proxied = await startStack('gw_cookie_secure', { trustedProxies: ['127.0.0.1'] });
    try {
      const res = await proxied.app.inject({
        method: 'POST',
        url: '/admin/v1/auth/login',
        payload: OWNER,
        headers: { 'x-forwarded-proto': 'https' },
        remoteAddress: '127.0.0.1',
      });
      expect(res.statusCode).toBe(200);
      const attributes = String(res.headers['set-cookie']).split('; ');
      expect(attributes[0]).toBe(`__Host-rp_session=${res.json().token}`);
      expect(attributes).toContain('Secure');
      expect(attributes).toContain('Path=/');
    } finally {
      await proxied.close();
    }
  });

  it('the cookie alone authenticates GET /admin/v1/auth/session, which says so and answers the CSRF token', async () => {
    const session = await login();
    const res = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: session.cookie,
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.authenticated_by).toBe('cookie');
    expect(body.csrf_token).toBe(session.csrf_token);
    expect(body.user.email).toBe(OWNER.email);
    expect(body.tenant.name).toBe('acme');
    expect(body.role).toBe('owner');
    expect(body.expires_at).toBe(session.expires_at);
  });

  it('a bearer request says authenticated_by bearer and gets no CSRF token', async () => {
    const session = await login();
    const res = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: { authorization: `Bearer ${session.token}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().authenticated_by).toBe('bearer');
    expect(res.json()).not.toHaveProperty('csrf_token');
  });

  it('a cookie-authenticated state change without the CSRF token, or with a wrong one, is refused 403', async () => {
    const session = await login();
    const other = await login();
    const wrong: [string, Record<string, string>][] = [
      ['no token', {}],
      ['an empty token', { 'x-csrf-token': '' }],
      ['a made-up token', { 'x-csrf-token': 'A'.repeat(43) }],
      ['the session token itself', { 'x-csrf-token': session.token }],
      ["another session's token", { 'x-csrf-token': other.csrf_token }],
    ];
    for (const [what, headers] of wrong) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/admin/v1/projects',
        headers: { ...session.cookie, ...headers },
        payload: { name: 'refused' },
      });
      expect(res.statusCode, what).toBe(403);
      expect(res.json(), what).toEqual(CSRF_REFUSED);
    }
    const list = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/projects',
      headers: session.cookie,
    });
    expect(list.statusCode).toBe(200);
    expect(list.json().projects).not.toContainEqual(expect.objectContaining({ name: 'refused' }));
  });

  it('a cookie-authenticated state change with the right CSRF token succeeds', async () => {
    const session = await login();
    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/projects',
      headers: { ...session.cookie, 'x-csrf-token': session.csrf_token },
      payload: { name: 'with-csrf' },
    });
    expect(res.statusCode).toBe(201);
  });

  it('a bearer state change needs no CSRF token', async () => {
    const session = await login();
    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/projects',
      headers: { authorization: `Bearer ${session.token}` },
      payload: { name: 'bearer-no-csrf' },
    });
    expect(res.statusCode).toBe(201);
  });

  it('a bearer header wins over a cookie', async () => {
    const session = await login();
    // A broken bearer is not rescued by a valid cookie.
    const broken = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: { ...session.cookie, authorization: 'Bearer nope' },
    });
    expect(broken.statusCode).toBe(401);
    // A valid bearer with a cookie: bearer, so no CSRF token is needed.
    const both = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/projects',
      headers: { ...session.cookie, authorization: `Bearer ${session.token}` },
      payload: { name: 'bearer-and-cookie' },
    });
    expect(both.statusCode).toBe(201);
    const who = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: { ...session.cookie, authorization: `Bearer ${session.token}` },
    });
    expect(who.json().authenticated_by).toBe('bearer');
  });

  it('a cookie holding anything but a user session token is refused 401', async () => {
    const res = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: { cookie: 'rp_session=svc_live_0000' },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'invalid or expired token' });
  });

  it('logout needs the CSRF token with a cookie, clears the cookie, and the cookie then gets 401', async () => {
    const session = await login();
    const refused = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/logout',
      headers: session.cookie,
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual(CSRF_REFUSED);

    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/logout',
      headers: { ...session.cookie, 'x-csrf-token': session.csrf_token },
    });
    expect(res.statusCode).toBe(204);
    const cleared = String(res.headers['set-cookie']).split('; ');
    expect(cleared[0]).toBe('rp_session=');
    expect(cleared).toContain('Max-Age=0');
    expect(cleared).toContain('HttpOnly');
    expect(cleared).toContain('Path=/');

    const after = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: session.cookie,
    });
    expect(after.statusCode).toBe(401);
    expect(after.json()).toEqual({ error: 'invalid or expired token' });
    // A logged-out cookie is 401 even on a state change with its (still derivable) CSRF token.
    const write = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/projects',
      headers: { ...session.cookie, 'x-csrf-token': session.csrf_token },
      payload: { name: 'after-logout' },
    });
    expect(write.statusCode).toBe(401);
  });

  it('an expired session cookie is refused 401, reads and writes alike', async () => {
    const clock = new ManualClock(Date.now());
    const timed = await startStack('gw_cookie_expiry', { adminClock: clock });
    try {
      const res = await timed.app.inject({ method: 'POST', url: '/admin/v1/auth/login', payload: OWNER });
      expect(res.statusCode).toBe(200);
      const { token, csrf_token, expires_at } = res.json();
      const headers = { cookie: `rp_session=${token}` };
      const before = await timed.app.inject({ method: 'GET', url: '/admin/v1/auth/session', headers });
      expect(before.statusCode).toBe(200);
      clock.set(new Date(Date.parse(expires_at) + 1_000));
      const read = await timed.app.inject({ method: 'GET', url: '/admin/v1/auth/session', headers });
      expect(read.statusCode).toBe(401);
      expect(read.json()).toEqual({ error: 'invalid or expired token' });
      const write = await timed.app.inject({
        method: 'POST',
        url: '/admin/v1/projects',
        headers: { ...headers, 'x-csrf-token': csrf_token },
        payload: { name: 'after-expiry' },
      });
      expect(write.statusCode).toBe(401);
      expect(write.json()).toEqual({ error: 'invalid or expired token' });
    } finally {
      await timed.close();
    }
  });

  it('bearer logout also clears the cookie', async () => {
    const session = await login();
    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/logout',
      headers: { authorization: `Bearer ${session.token}` },
    });
    expect(res.statusCode).toBe(204);
    expect(String(res.headers['set-cookie'])).toMatch(/^rp_session=;.*Max-Age=0/);
  });
});
