/** The device flow through the gateway's HTTP surface, with the real services behind it. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csrfTokenFor } from '../src/plugins/csrf.ts';
import { OWNER, type Stack, startStack } from './support/stack.ts';

const GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const BASE = 'http://localhost:80';

describe('device authorization grant over HTTP', () => {
  let stack: Stack;
  let owner: { authorization: string };

  beforeAll(async () => {
    stack = await startStack('gw_device');
    owner = await stack.ownerAuth();
  });
  afterAll(async () => {
    await stack?.close();
  });

  const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
  const postForm = (url: string, payload: string) =>
    stack.app.inject({ method: 'POST', url, headers: FORM, payload });

  /** Each form body answers 400 with exactly its OAuth error. */
  async function expectOAuthErrors(url: string, cases: [string, string][]) {
    for (const [payload, error] of cases) {
      const res = await postForm(url, payload);
      expect({ payload, status: res.statusCode, body: res.json() }).toEqual({
        payload,
        status: 400,
        body: { error },
      });
    }
  }

  async function startFlow() {
    const res = await postForm(
      '/admin/v1/auth/device/code',
      form({ client_id: 'relayplane-cli', scope: 'cli' }),
    );
    expect(res.statusCode).toBe(200);
    return res.json<{ device_code: string; user_code: string }>();
  }

  function poll(deviceCode: string, clientId = 'relayplane-cli') {
    return postForm(
      '/admin/v1/auth/token',
      form({ grant_type: GRANT, device_code: deviceCode, client_id: clientId }),
    );
  }

  function approve(userCode: string, action: 'approve' | 'deny', headers: Record<string, string> = owner) {
    return stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/device/approve',
      headers,
      payload: { user_code: userCode, action },
    });
  }

  it('POST /admin/v1/auth/device/code answers RFC 8628 §3.2 to a form post, uncached', async () => {
    const res = await postForm('/admin/v1/auth/device/code', 'client_id=relayplane-cli');
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(
      [
        'device_code',
        'expires_in',
        'interval',
        'user_code',
        'verification_uri',
        'verification_uri_complete',
      ].sort(),
    );
    expect(body.device_code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(body.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(body.verification_uri).toBe(`${BASE}/activate`);
    expect(body.verification_uri_complete).toBe(`${BASE}/activate?user_code=${body.user_code}`);
    expect(body.expires_in).toBe(600);
    expect(body.interval).toBe(5);
  });

  it('accepts JSON too, and answers OAuth errors as exactly {"error": code}', async () => {
    const json = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/device/code',
      payload: { client_id: 'relayplane-cli' },
    });
    expect(json.statusCode).toBe(200);
    // RFC 6749 §3.1: an empty parameter counts as omitted; unknown form parameters are ignored.
    const emptyScope = await postForm(
      '/admin/v1/auth/device/code',
      'client_id=relayplane-cli&scope=&extension=1',
    );
    expect(emptyScope.statusCode).toBe(200);
    const cases: [string, string][] = [
      ['client_id=someone-else', 'invalid_client'],
      ['', 'invalid_request'],
      ['scope=x', 'invalid_request'],
      ['client_id=&scope=', 'invalid_request'],
      ['client_id=relayplane-cli&client_id=relayplane-cli', 'invalid_request'],
      ['client_id=relayplane-cli&scope=a%22b', 'invalid_scope'],
    ];
    await expectOAuthErrors('/admin/v1/auth/device/code', cases);
    const unknownField = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/device/code',
      payload: { client_id: 'relayplane-cli', surprise: 1 },
    });
    expect(unknownField.statusCode).toBe(400);
    expect(unknownField.json()).toEqual({ error: 'invalid_request' });
  });

  it('POST /admin/v1/auth/token: pending, slow_down, approved once, then invalid_grant; the token works', async () => {
    const { device_code, user_code } = await startFlow();
    const pending = await poll(device_code);
    expect({ status: pending.statusCode, body: pending.json() }).toEqual({
      status: 400,
      body: { error: 'authorization_pending' },
    });
    expect(pending.headers['cache-control']).toBe('no-store');
    const early = await poll(device_code);
    expect({ status: early.statusCode, body: early.json() }).toEqual({
      status: 400,
      body: { error: 'slow_down' },
    });

    const approved = await approve(user_code.toLowerCase().replace('-', ''), 'approve');
    expect({ status: approved.statusCode, body: approved.json() }).toEqual({
      status: 200,
      body: { status: 'approved', client_id: 'relayplane-cli' },
    });

    const token = await poll(device_code);
    expect(token.statusCode).toBe(200);
    expect(token.headers['cache-control']).toBe('no-store');
    const body = token.json();
    expect(body).toEqual({
      access_token: expect.stringMatching(/^rpc_[0-9a-f]{72}$/),
      token_type: 'Bearer',
      expires_in: 2_592_000,
    });
    const again = await poll(device_code);
    expect({ status: again.statusCode, body: again.json() }).toEqual({
      status: 400,
      body: { error: 'invalid_grant' },
    });

    const session = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: { authorization: `Bearer ${body.access_token}` },
    });
    expect(session.statusCode).toBe(200);
    expect(session.json().user.email).toBe(OWNER.email);

    // A CLI token does not approve devices.
    const other = await startFlow();
    const refused = await approve(other.user_code, 'approve', {
      authorization: `Bearer ${body.access_token}`,
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({
      error: 'approving a device needs a login session; a CLI token cannot approve devices',
    });
  });

  it('POST /admin/v1/auth/token refuses other grant types, missing parameters, unknown codes and clients', async () => {
    const { device_code } = await startFlow();
    const cases: [string, string][] = [
      [form({ grant_type: 'authorization_code', code: 'x' }), 'unsupported_grant_type'],
      [form({ grant_type: 'client_credentials' }), 'unsupported_grant_type'],
      [form({ device_code, client_id: 'relayplane-cli' }), 'invalid_request'],
      [form({ grant_type: GRANT, client_id: 'relayplane-cli' }), 'invalid_request'],
      [form({ grant_type: GRANT, device_code }), 'invalid_request'],
      [form({ grant_type: GRANT, device_code: 'nope', client_id: 'relayplane-cli' }), 'invalid_grant'],
      [form({ grant_type: GRANT, device_code, client_id: 'someone-else' }), 'invalid_client'],
    ];
    await expectOAuthErrors('/admin/v1/auth/token', cases);
    const malformed = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/token',
      headers: { 'content-type': 'application/json' },
      payload: '{"grant_type": ',
    });
    expect({ status: malformed.statusCode, body: malformed.json() }).toEqual({
      status: 400,
      body: { error: 'invalid_request' },
    });
  });

  it('a denied grant answers access_denied; decided or unknown codes are 404, malformed ones 400', async () => {
    const { device_code, user_code } = await startFlow();
    const denied = await approve(user_code, 'deny');
    expect({ status: denied.statusCode, body: denied.json() }).toEqual({
      status: 200,
      body: { status: 'denied', client_id: 'relayplane-cli' },
    });
    const res = await poll(device_code);
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 400,
      body: { error: 'access_denied' },
    });
    const notFound = {
      error:
        'no pending device authorization for this code: it is unknown, expired, or already approved or denied',
    };
    const again = await approve(user_code, 'approve');
    expect({ status: again.statusCode, body: again.json() }).toEqual({ status: 404, body: notFound });
    const unknown = await approve('BBBB-BBBB', 'approve');
    expect({ status: unknown.statusCode, body: unknown.json() }).toEqual({ status: 404, body: notFound });
    const malformed = await approve('AEIO-0000', 'approve');
    expect(malformed.statusCode).toBe(400);
    expect(Object.keys(malformed.json())).toEqual(['error']);
  });

  it('GET /.well-known/oauth-authorization-server names the endpoints (RFC 8414), cacheable briefly', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.json()).toEqual({
      issuer: BASE,
      device_authorization_endpoint: `${BASE}/admin/v1/auth/device/code`,
      token_endpoint: `${BASE}/admin/v1/auth/token`,
      grant_types_supported: [GRANT],
      response_types_supported: [],
      token_endpoint_auth_methods_supported: ['none'],
      service_documentation: `${BASE}/docs`,
    });
  });

  it('the rest of the gateway still answers 415 to form bodies', async () => {
    const login = await postForm('/admin/v1/auth/login', form(OWNER));
    expect({ status: login.statusCode, body: login.json() }).toEqual({
      status: 415,
      body: { error: 'content-type must be application/json' },
    });
    const approveForm = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/device/approve',
      headers: { ...owner, ...FORM },
      payload: form({ user_code: 'BBBB-BBBB', action: 'approve' }),
    });
    expect(approveForm.statusCode).toBe(415);
  });

  describe('the verification page', () => {
    const PAGE_HEADERS = {
      'cache-control': 'no-store',
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
    };

    it('logs in through its form, comes back with the code, and approves with the hidden CSRF token', async () => {
      const { device_code, user_code } = await startFlow();
      const anonymous = await stack.app.inject({ method: 'GET', url: `/device?user_code=${user_code}` });
      expect(anonymous.statusCode).toBe(200);
      expect(anonymous.headers).toMatchObject(PAGE_HEADERS);
      expect(anonymous.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(anonymous.body).toContain('action="/device/login"');
      expect(anonymous.body).toContain(`name="user_code" value="${user_code}"`);
      // Login CSRF: the form carries a random token that must match its SameSite=Strict cookie.
      const loginCsrf = /name="login_csrf" value="([^"]+)"/.exec(anonymous.body)?.[1] ?? '';
      const csrfCookie = String(anonymous.headers['set-cookie']);
      expect(csrfCookie).toMatch(new RegExp(`^rp_login_csrf=${loginCsrf};`));
      expect(csrfCookie).toContain('SameSite=Strict');
      expect(csrfCookie).toContain('Path=/device');
      const withCsrf = { ...FORM, cookie: `rp_login_csrf=${loginCsrf}` };

      // A cross-site post cannot send the cookie; a forged field alone is refused before any login.
      for (const headers of [FORM, { ...FORM, cookie: 'rp_login_csrf=forged' }]) {
        const forged = await stack.app.inject({
          method: 'POST',
          url: '/device/login',
          headers,
          payload: form({ email: OWNER.email, password: OWNER.password, user_code, login_csrf: loginCsrf }),
        });
        expect(forged.statusCode).toBe(403);
        expect(forged.body).toContain('This login form expired or was not sent from this site');
        expect(String(forged.headers['set-cookie'])).not.toContain('rp_session=');
      }

      const wrong = await stack.app.inject({
        method: 'POST',
        url: '/device/login',
        headers: withCsrf,
        payload: form({ email: OWNER.email, password: 'wrong password', user_code, login_csrf: loginCsrf }),
      });
      expect(wrong.statusCode).toBe(401);
      expect(wrong.body).toContain('invalid email or password');
      expect(String(wrong.headers['set-cookie'])).not.toContain('rp_session=');

      const login = await stack.app.inject({
        method: 'POST',
        url: '/device/login',
        headers: withCsrf,
        payload: form({ email: OWNER.email, password: OWNER.password, user_code, login_csrf: loginCsrf }),
      });
      expect(login.statusCode).toBe(303);
      expect(login.headers.location).toBe(`/device?user_code=${user_code}`);
      const setCookie = String(login.headers['set-cookie']);
      expect(setCookie).toMatch(/^rp_session=rpu_[0-9a-f]{72};/);
      expect(setCookie).toContain('HttpOnly');
      expect(setCookie).toContain('SameSite=Strict');
      const sessionToken = /^rp_session=([^;]+)/.exec(setCookie)?.[1] ?? '';
      const cookie = { cookie: `rp_session=${sessionToken}` };

      const shown = await stack.app.inject({
        method: 'GET',
        url: `/device?user_code=${user_code}`,
        headers: cookie,
      });
      expect(shown.statusCode).toBe(200);
      expect(shown.headers).toMatchObject(PAGE_HEADERS);
      expect(shown.body).toContain(user_code);
      expect(shown.body).toContain('relayplane-cli');
      expect(shown.body).toContain(OWNER.email);
      const csrf = csrfTokenFor(sessionToken);
      expect(shown.body).toContain(`name="csrf_token" value="${csrf}"`);

      const noCsrf = await stack.app.inject({
        method: 'POST',
        url: '/device',
        headers: { ...cookie, ...FORM },
        payload: form({ user_code, action: 'approve' }),
      });
      expect(noCsrf.statusCode).toBe(403);
      expect(noCsrf.headers['content-type']).toMatch(/^text\/html/);
      const badCsrf = await stack.app.inject({
        method: 'POST',
        url: '/device',
        headers: { ...cookie, ...FORM },
        payload: form({ user_code, action: 'approve', csrf_token: 'A'.repeat(43) }),
      });
      expect(badCsrf.statusCode).toBe(403);
      const foreign = await stack.app.inject({
        method: 'POST',
        url: '/device',
        headers: { ...cookie, ...FORM, origin: 'https://evil.example' },
        payload: form({ user_code, action: 'approve', csrf_token: csrf }),
      });
      expect(foreign.statusCode).toBe(403);
      const noSession = await postForm('/device', form({ user_code, action: 'approve', csrf_token: csrf }));
      expect(noSession.statusCode).toBe(401);
      expect(noSession.body).toContain('action="/device/login"');
      // None of the refusals decided anything.
      expect((await poll(device_code)).json()).toEqual({ error: 'authorization_pending' });

      const approved = await stack.app.inject({
        method: 'POST',
        url: '/device',
        headers: { ...cookie, ...FORM, origin: BASE },
        payload: form({ user_code, action: 'approve', csrf_token: csrf }),
      });
      expect(approved.statusCode).toBe(200);
      expect(approved.headers).toMatchObject(PAGE_HEADERS);
      expect(approved.body).toContain('Device approved');

      const token = await poll(device_code);
      expect(token.statusCode).toBe(200);
      expect(token.json().token_type).toBe('Bearer');

      const decidedAgain = await stack.app.inject({
        method: 'GET',
        url: `/device?user_code=${user_code}`,
        headers: cookie,
      });
      expect(decidedAgain.statusCode).toBe(404);
      expect(decidedAgain.body).toContain('already approved or denied');
    });

    it('denies from the page, offers a code field without a code, and escapes what it echoes', async () => {
      const login = await stack.app.inject({ method: 'POST', url: '/admin/v1/auth/login', payload: OWNER });
      const token = login.json().token as string;
      const cookie = { cookie: `rp_session=${token}` };

      const entry = await stack.app.inject({ method: 'GET', url: '/device', headers: cookie });
      expect(entry.statusCode).toBe(200);
      expect(entry.body).toContain('name="user_code"');

      const hostile = '"><script>alert(1)</script>';
      const bad = await stack.app.inject({
        method: 'GET',
        url: `/device?user_code=${encodeURIComponent(hostile)}`,
        headers: cookie,
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.body).not.toContain('<script>');
      expect(bad.body).toContain('&#34;&#62;&#60;script&#62;');

      const { device_code, user_code } = await startFlow();
      const denied = await stack.app.inject({
        method: 'POST',
        url: '/device',
        headers: { ...cookie, ...FORM },
        payload: form({ user_code, action: 'deny', csrf_token: csrfTokenFor(token) }),
      });
      expect(denied.statusCode).toBe(200);
      expect(denied.body).toContain('Request denied');
      expect((await poll(device_code)).json()).toEqual({ error: 'access_denied' });
    });
  });

  it('limits device code issuance per client IP: 429 with Retry-After', async () => {
    let limited: Awaited<ReturnType<typeof stack.app.inject>> | undefined;
    for (let i = 0; i < 40 && !limited; i++) {
      const res = await postForm('/admin/v1/auth/device/code', 'client_id=relayplane-cli');
      if (res.statusCode === 429) limited = res;
      else expect(res.statusCode).toBe(200);
    }
    expect(limited?.json()).toEqual({ error: 'too many device authorization requests; retry later' });
    expect(Number(limited?.headers['retry-after'])).toBeGreaterThan(0);
  });
});
