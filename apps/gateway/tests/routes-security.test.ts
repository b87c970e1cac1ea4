import { newToken } from '@relayplane/contract/tokens';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES } from './support/routes.ts';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

/** The shared security suite: every authenticated route, every way a bearer can be wrong. */
describe('gateway routes: authentication and authorization', () => {
  let stack: Stack;
  let userAuth: { authorization: string };
  beforeAll(async () => {
    stack = await startStack('gw_security');
    userAuth = (await tenant(stack, { email: 'plain@example.test', name: 'Plain' })).auth;
  });
  afterAll(async () => {
    await stack?.close();
  });

  const validToken = newToken('userSession');
  const badBearers: [string, Record<string, string>, string | RegExp][] = [
    ['no Authorization header', {}, /missing bearer token/],
    ['a Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }, /malformed Authorization header/],
    ['an empty bearer', { authorization: 'Bearer ' }, /malformed Authorization header/],
    ['an unknown prefix', { authorization: `Bearer xyz_${'a'.repeat(72)}` }, 'invalid or expired token'],
    [
      'an API key as bearer',
      { authorization: `Bearer svc_live_${'a'.repeat(64)}` },
      'invalid or expired token',
    ],
    [
      'a broken checksum',
      { authorization: `Bearer ${validToken.slice(0, -1)}${validToken.endsWith('0') ? '1' : '0'}` },
      'invalid or expired token',
    ],
    [
      'a well-formed but unknown token',
      { authorization: `Bearer ${newToken('userSession')}` },
      'invalid or expired token',
    ],
    [
      'a well-formed token of another kind',
      { authorization: `Bearer ${newToken('bot')}` },
      'invalid or expired token',
    ],
  ];

  const bearerRoutes = ROUTES.filter((r) => ['session', 'platform_admin', 'relay_node'].includes(r.auth));
  for (const route of bearerRoutes) {
    for (const [what, headers, message] of badBearers) {
      it(`${route.method} ${route.url} answers 401 for ${what}`, async () => {
        const res = await stack.app.inject({
          method: route.method,
          url: route.url,
          headers,
          ...(route.body ? { payload: route.body } : {}),
        });
        expect(res.statusCode).toBe(401);
        const body = res.json();
        expect(Object.keys(body)).toEqual(['error']);
        // A guard that takes Basic too (`<relay_id>:<node token>`, declared by GuardInfo.basic)
        // reads `pass` as a node token, which it is not.
        const basic = stack.routes.some(
          (r) => r.method === route.method && r.url === route.url && r.basicAuth,
        );
        const expected = basic && what === 'a Basic scheme' ? 'invalid or expired token' : message;
        if (typeof expected === 'string') expect(body.error).toBe(expected);
        else expect(body.error).toMatch(expected);
      });
    }
  }

  it('POST /v1/relays/auth answers 401 for Basic credentials without a colon', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/relays/auth',
      headers: { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` },
      payload: {
        id: '00ff',
        event: 'connect',
        node: 'rly_00000000000000000000',
        transport: 'quic',
        path: '/',
      },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: expect.stringMatching(/malformed Basic credentials/) });
  });

  const badApiKeys: [string, Record<string, string>, string | RegExp][] = [
    ['no X-API-Key header', {}, /missing API key/],
    [
      'a key with an unknown prefix',
      { 'x-api-key': `svc_prod_${'a'.repeat(64)}` },
      'invalid or expired token',
    ],
    ['a key that is too short', { 'x-api-key': `svc_live_${'a'.repeat(63)}` }, 'invalid or expired token'],
    ['a key in upper case', { 'x-api-key': `svc_live_${'A'.repeat(64)}` }, 'invalid or expired token'],
    ['a session token as API key', { 'x-api-key': newToken('userSession') }, 'invalid or expired token'],
    [
      'a well-formed but unknown key',
      { 'x-api-key': `svc_live_${'0'.repeat(64)}` },
      'invalid or expired token',
    ],
    [
      'a bearer session instead of an API key',
      { authorization: `Bearer ${newToken('userSession')}` },
      /missing API key/,
    ],
  ];
  for (const route of ROUTES.filter((r) => r.auth === 'api_key')) {
    for (const [what, headers, message] of badApiKeys) {
      it(`${route.method} ${route.url} answers 401 for ${what}`, async () => {
        const res = await stack.app.inject({
          method: route.method,
          url: route.url,
          headers,
          payload: route.body ?? {},
        });
        expect(res.statusCode).toBe(401);
        const body = res.json();
        expect(Object.keys(body)).toEqual(['error']);
        if (typeof message === 'string') expect(body.error).toBe(message);
        else expect(body.error).toMatch(message);
      });
    }
  }

  const header = Buffer.from('{"alg":"EdDSA","typ":"JWT","kid":"nope"}').toString('base64url');
  const payload = Buffer.from('{"sub":"prj_x","exp":9999999999}').toString('base64url');
  const badCredentials: [string, Record<string, string>, string | RegExp][] = [
    ['no Authorization header', {}, /missing credential/],
    [
      'a session token instead of a credential',
      { authorization: `Bearer ${newToken('userSession')}` },
      'invalid or expired token',
    ],
    [
      'a forged credential',
      { authorization: `Bearer ${header}.${payload}.${'A'.repeat(86)}` },
      'invalid or expired token',
    ],
    ['an unsigned credential', { authorization: `Bearer ${header}.${payload}.` }, 'invalid or expired token'],
  ];
  for (const route of ROUTES.filter((r) => r.auth === 'relay_credential')) {
    for (const [what, headers, message] of badCredentials) {
      it(`${route.method} ${route.url} answers 401 for ${what}`, async () => {
        const res = await stack.app.inject({ method: route.method, url: route.url, headers });
        expect(res.statusCode).toBe(401);
        const body = res.json();
        if (typeof message === 'string') expect(body).toEqual({ error: message });
        else expect(body.error).toMatch(message);
      });
    }
  }

  it('every served route is covered by this suite', () => {
    const served = stack.routes.filter((r) => r.documented).map((r) => `${r.method} ${r.url}`);
    const covered = ROUTES.map(
      (r) =>
        `${r.method} ${r.url
          .replace(/prj_0+/, ':project_id')
          .replace(/kid_0+\.jwk$/, ':file')
          .replace(/kid_0+/, ':kid')
          .replace(/identities\/bot_0+/, 'identities/:identity_id')
          .replace(/idt_0+/, ':token_id')
          .replace(/bot_0+/, ':bot_id')
          .replace(/key_0+/, ':key_id')
          .replace(/crd_0+/, ':jti')
          .replace(/rly_0+/, ':relay_id')
          .replace(/alw_0+/, ':entry_id')
          .replace(/whk_0+/, ':webhook_id')
          .replace(/dlv_0+/, ':delivery_id')
          .replace(/ten_0+/, ':tenant_id')
          .replace(/usr_0+/, ':user_id')
          .replace(/cks_0+/, ':id')
          .replace(/ses_0+/, ':id')
          .replace(/sessions\/00ff\/end$/, 'sessions/:session_id/end')
          .replace(/webhooks\/stripe$/, 'webhooks/:provider')
          .replace(/\?.*$/, '')}`,
    );
    expect(served.sort()).toEqual(covered.sort());
  });

  for (const route of ROUTES.filter((r) => r.auth === 'platform_admin')) {
    it(`${route.method} ${route.url} answers 403 to a tenant owner who is not a platform admin`, async () => {
      const res = await stack.app.inject({ method: route.method, url: route.url, headers: userAuth });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ error: 'this operation needs a platform administrator' });
    });
  }

  it('public routes need no credentials', async () => {
    for (const route of ROUTES.filter((r) => r.auth === 'none' && r.method === 'GET')) {
      const res = await stack.app.inject({ method: route.method, url: route.url });
      // A kid no key has: 404 (not 401) is the answer without credentials.
      expect(res.statusCode, route.url).toBe(route.url.endsWith('.jwk') ? 404 : 200);
    }
  });
});
