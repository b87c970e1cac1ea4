/**
 * HTTP hardening through the gateway's HTTP surface (docs/security.md): secrets never cached,
 * pages never framed, HTTPS through a trusted proxy (HSTS and the `__Host-` cookie), and
 * checkout capability URLs cut from the access log.
 */
import { createLogger } from '@relayplane/shared/logger';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { Secret, TOTP } from 'otpauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_CSP } from '../src/html.ts';
import { DOCS_CSP, HSTS } from '../src/plugins/security-headers.ts';
import { OWNER, type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

/** The proxy in front of the gateway (`GATEWAY_TRUSTED_PROXIES`). */
const PROXY = '10.9.8.7';
/** A client reaching the gateway directly: its `X-Forwarded-Proto` means nothing. */
const STRANGER = '192.0.2.50';
const VIA_PROXY = { remoteAddress: PROXY, headers: { 'x-forwarded-proto': 'https' } } as const;

/** An access log line, as far as these tests read it. */
type LogLine = { msg?: string; reqId?: string; req?: { method: string; url: string } };

type OpenApi = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
};
type Operation = {
  operationId: string;
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
};
type Schema = {
  $ref?: string;
  description?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  allOf?: Schema[];
  anyOf?: Schema[];
  oneOf?: Schema[];
};

/**
 * The rule: an answer carries a secret when its 2xx body has a field named like one, or one its
 * description calls shown once ("Shown only here"), at any depth; and an answer to a request
 * that carries a password is treated the same (sign-up, login, password change).
 */
const SECRET_FIELD =
  /^(token|key|secret|value|password|access_token|refresh_token|id_token|device_code|csrf_token|client_secret|jwt)$/;
const SHOWN_ONCE = /shown only here|shown once/i;
const PASSWORD_FIELD = /password$/;

/** What issue 18 names as answering a secret: the rule must find each. */
const ISSUE_NAMED = [
  'login',
  'token',
  'signup',
  'createApiKey',
  'createBotKey',
  'createIdentityToken',
  'issueCredential',
  'registerRelay',
];

function resolve(doc: OpenApi, schema: Schema): Schema {
  if (!schema.$ref) return schema;
  const name = schema.$ref.split('/').pop() ?? '';
  const target = doc.components.schemas[name];
  if (!target) throw new Error(`unresolved $ref ${schema.$ref}`);
  return target;
}

function fieldsWhere(
  doc: OpenApi,
  schema: Schema | undefined,
  test: (name: string, property: Schema) => boolean,
  seen = new Set<Schema>(),
): string[] {
  if (!schema) return [];
  const s = resolve(doc, schema);
  if (seen.has(s)) return [];
  seen.add(s);
  const found: string[] = [];
  for (const [name, property] of Object.entries(s.properties ?? {})) {
    if (test(name, resolve(doc, property))) found.push(name);
    found.push(...fieldsWhere(doc, property, test, seen).map((f) => `${name}.${f}`));
  }
  for (const sub of [s.items, ...(s.allOf ?? []), ...(s.anyOf ?? []), ...(s.oneOf ?? [])]) {
    found.push(...fieldsWhere(doc, sub, test, seen));
  }
  return found;
}

interface SecretOperation {
  method: string;
  path: string;
  why: string[];
}

function secretOperations(doc: OpenApi): Map<string, SecretOperation> {
  const found = new Map<string, SecretOperation>();
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const why: string[] = [];
      for (const [status, response] of Object.entries(op.responses)) {
        if (!/^2/.test(status)) continue;
        for (const media of Object.values(response.content ?? {})) {
          why.push(
            ...fieldsWhere(
              doc,
              media.schema,
              (name, p) => SECRET_FIELD.test(name) || SHOWN_ONCE.test(p.description ?? ''),
            ).map((f) => `answers ${f}`),
          );
        }
      }
      for (const media of Object.values(op.requestBody?.content ?? {})) {
        why.push(
          ...fieldsWhere(doc, media.schema, (name) => PASSWORD_FIELD.test(name)).map((f) => `sends ${f}`),
        );
      }
      if (why.length > 0) found.set(op.operationId, { method: method.toUpperCase(), path, why });
    }
  }
  return found;
}

/** `/a/{id}/b` as a pattern for a concrete URL. */
function pathPattern(path: string): RegExp {
  return new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}(\\?.*)?$`);
}

describe('gateway HTTP hardening', () => {
  let stack: Stack;
  let doc: OpenApi;
  let owner: { authorization: string };
  let t: Tenant;
  let projectId: string;
  const lines: string[] = [];

  beforeAll(async () => {
    stack = await startStack('gw_http_hardening', {
      trustedProxies: [PROXY],
      gatewayLogger: createLogger(
        { level: 'info', service: 'gateway' },
        { write: (l: string) => lines.push(l) },
      ),
    });
    owner = await stack.ownerAuth();
    t = await tenant(stack, { email: 'hardening@example.test', name: 'Hardening' });
    projectId = await t.project('hardening');
    const res = await stack.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    doc = res.json();
  });
  afterAll(async () => {
    await stack?.close();
  });

  const inject = (o: InjectOptions) => stack.app.inject(o);

  async function bot(): Promise<string> {
    const res = await inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots`,
      headers: t.auth,
      payload: { name: `bot-${lines.length}-${Date.now() % 100_000}`, role: 'developer' },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json<{ id: string }>().id;
  }

  async function deviceCode(): Promise<{ device_code: string; user_code: string }> {
    const res = await inject({
      method: 'POST',
      url: '/admin/v1/auth/device/code',
      payload: { client_id: 'relayplane-cli' },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }

  /** A user of its own with a TOTP second factor: its login's first step answers an mfa_token. */
  let mfaSeq = 0;
  async function enrolledUser(): Promise<{ email: string; totp: TOTP; auth: { authorization: string } }> {
    const email = `hardening-mfa-${++mfaSeq}@example.test`;
    const password = 'a long enough password';
    const signup = await inject({
      method: 'POST',
      url: '/admin/v1/auth/signup',
      payload: { email, password, tenant_name: `mfa ${mfaSeq}` },
    });
    expect(signup.statusCode, signup.body).toBe(201);
    const login = await inject({ method: 'POST', url: '/admin/v1/auth/login', payload: { email, password } });
    const auth = { authorization: `Bearer ${login.json<{ token: string }>().token}` };
    const started = await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp', headers: auth });
    const totp = new TOTP({ secret: Secret.fromBase32(started.json<{ secret: string }>().secret) });
    const confirmed = await inject({
      method: 'POST',
      url: '/admin/v1/auth/mfa/totp/confirm',
      headers: auth,
      payload: { code: totp.generate() },
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    return { email, totp, auth };
  }

  /** How to get each secret-bearing operation to answer 2xx. */
  const webhook = () =>
    inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/webhooks`,
      headers: t.auth,
      payload: { url: 'https://1.1.1.1/hardening', events: ['plan.changed'] },
    });
  const CALLERS: Record<string, () => Promise<LightMyRequestResponse>> = {
    signup: () =>
      inject({
        method: 'POST',
        url: '/admin/v1/auth/signup',
        payload: {
          email: 'walk-signup@example.test',
          password: 'a long enough password',
          tenant_name: 'walk',
        },
      }),
    login: () => inject({ method: 'POST', url: '/admin/v1/auth/login', payload: OWNER }),
    loginMfa: async () => {
      const user = await enrolledUser();
      const first = await inject({
        method: 'POST',
        url: '/admin/v1/auth/login',
        payload: { email: user.email, password: 'a long enough password' },
      });
      // The confirmation used this step's code: the next step's is accepted too (±1).
      return inject({
        method: 'POST',
        url: '/admin/v1/auth/login/mfa',
        payload: {
          mfa_token: first.json<{ mfa_token: string }>().mfa_token,
          code: user.totp.generate({ timestamp: Date.now() + 30_000 }),
        },
      });
    },
    renewRecoveryCodes: async () => {
      const user = await enrolledUser();
      // The confirmation used this step's code: the next step's is accepted too (±1).
      return inject({
        method: 'POST',
        url: '/admin/v1/auth/mfa/recovery-codes',
        headers: user.auth,
        payload: { code: user.totp.generate({ timestamp: Date.now() + 30_000 }) },
      });
    },
    disableTotp: async () => {
      const user = await enrolledUser();
      return inject({
        method: 'DELETE',
        url: '/admin/v1/auth/mfa/totp',
        headers: user.auth,
        payload: { password: 'a long enough password' },
      });
    },
    startTotpEnrollment: async () => {
      const signup = await inject({
        method: 'POST',
        url: '/admin/v1/auth/signup',
        payload: {
          email: 'hardening-enrol@example.test',
          password: 'a long enough password',
          tenant_name: 'enrol',
        },
      });
      expect(signup.statusCode, signup.body).toBe(201);
      const login = await inject({
        method: 'POST',
        url: '/admin/v1/auth/login',
        payload: { email: 'hardening-enrol@example.test', password: 'a long enough password' },
      });
      return inject({
        method: 'POST',
        url: '/admin/v1/auth/mfa/totp',
        headers: { authorization: `Bearer ${login.json<{ token: string }>().token}` },
      });
    },
    confirmTotpEnrollment: async () => {
      const signup = await inject({
        method: 'POST',
        url: '/admin/v1/auth/signup',
        payload: {
          email: 'hardening-confirm@example.test',
          password: 'a long enough password',
          tenant_name: 'cnf',
        },
      });
      expect(signup.statusCode, signup.body).toBe(201);
      const login = await inject({
        method: 'POST',
        url: '/admin/v1/auth/login',
        payload: { email: 'hardening-confirm@example.test', password: 'a long enough password' },
      });
      const auth = { authorization: `Bearer ${login.json<{ token: string }>().token}` };
      const started = await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp', headers: auth });
      const totp = new TOTP({ secret: Secret.fromBase32(started.json<{ secret: string }>().secret) });
      return inject({
        method: 'POST',
        url: '/admin/v1/auth/mfa/totp/confirm',
        headers: auth,
        payload: { code: totp.generate() },
      });
    },
    getSession: () => inject({ method: 'GET', url: '/admin/v1/auth/session', headers: owner }),
    switchTenant: () =>
      inject({
        method: 'POST',
        url: '/admin/v1/auth/session/tenant',
        headers: t.auth,
        payload: { tenant_id: t.tenantId },
      }),
    changePassword: async () => {
      const who = await tenant(stack, { email: 'walk-password@example.test', name: 'Walk' });
      return inject({
        method: 'POST',
        url: '/admin/v1/auth/password',
        headers: who.auth,
        payload: { current_password: 'a long enough password', new_password: 'another long password' },
      });
    },
    startDeviceAuthorization: () =>
      inject({ method: 'POST', url: '/admin/v1/auth/device/code', payload: { client_id: 'relayplane-cli' } }),
    token: async () => {
      const flow = await deviceCode();
      const approved = await inject({
        method: 'POST',
        url: '/admin/v1/auth/device/approve',
        headers: owner,
        payload: { user_code: flow.user_code, action: 'approve' },
      });
      expect(approved.statusCode, approved.body).toBeLessThan(300);
      return inject({
        method: 'POST',
        url: '/admin/v1/auth/token',
        payload: {
          grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
          device_code: flow.device_code,
          client_id: 'relayplane-cli',
        },
      });
    },
    createApiKey: () =>
      inject({
        method: 'POST',
        url: `/admin/v1/projects/${projectId}/api-keys`,
        headers: t.auth,
        payload: { name: 'walk' },
      }),
    createBotKey: async () =>
      inject({
        method: 'POST',
        url: `/admin/v1/projects/${projectId}/bots/${await bot()}/keys`,
        headers: t.auth,
      }),
    createIdentityToken: async () =>
      inject({
        method: 'POST',
        url: `/v1/projects/${projectId}/identities/${await bot()}/tokens`,
        headers: t.auth,
        payload: { scopes: ['projects:read'] },
      }),
    issueCredential: async () => {
      const { key } = await t.apiKey(projectId);
      return inject({
        method: 'POST',
        url: '/api/v1/credentials',
        headers: { 'x-api-key': key },
        payload: {},
      });
    },
    registerRelay: () =>
      inject({
        method: 'POST',
        url: '/admin/v1/relays',
        headers: owner,
        payload: { region: 'eu', host: 'walk.example', port: 443 },
      }),
    // A public address literal (no DNS), subscribed to an event this file never causes: nothing is sent.
    createWebhookEndpoint: () => webhook(),
    rotateWebhookSecret: async () => {
      const created = await webhook();
      expect(created.statusCode, created.body).toBe(201);
      return inject({
        method: 'POST',
        url: `/admin/v1/projects/${projectId}/webhooks/${created.json().webhook.id}/rotate-secret`,
        headers: t.auth,
        payload: {},
      });
    },
  };

  describe('Cache-Control: no-store', () => {
    it('the rule finds every operation issue 18 names as answering a secret', () => {
      const found = secretOperations(doc);
      for (const operationId of ISSUE_NAMED) {
        expect(found.has(operationId), `${operationId} not found by the rule`).toBe(true);
      }
    });

    it('every operation that answers a secret answers it with no-store (walked from the OpenAPI document)', async () => {
      const found = secretOperations(doc);
      expect(found.size).toBeGreaterThanOrEqual(ISSUE_NAMED.length);
      for (const [operationId, op] of found) {
        const call = CALLERS[operationId];
        expect(call, `${operationId} (${op.why.join(', ')}) answers a secret: add a caller`).toBeDefined();
        if (!call) continue;
        const res = await call();
        const what = `${operationId} ${op.method} ${op.path}: ${res.statusCode} ${res.body}`;
        // The caller reached the operation it stands for, and it succeeded.
        expect(res.raw.req.method, what).toBe(op.method);
        expect(res.raw.req.url, what).toMatch(pathPattern(op.path));
        expect(res.statusCode, what).toBeGreaterThanOrEqual(200);
        expect(res.statusCode, what).toBeLessThan(300);
        expect(res.headers['cache-control'], what).toBe('no-store');
      }
    });

    it('a refusal is no-store too (a checkout answer holds a capability URL when it succeeds)', async () => {
      for (const res of [
        await inject({
          method: 'POST',
          url: '/admin/v1/auth/login',
          payload: { ...OWNER, password: 'wrong one!!' },
        }),
        await inject({ method: 'GET', url: '/admin/v1/projects' }),
        await inject({
          method: 'POST',
          url: '/admin/v1/billing/checkout-sessions',
          headers: t.auth,
          payload: { plan: 'no-such-plan' },
        }),
      ]) {
        expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
        expect(res.headers['cache-control']).toBe('no-store');
      }
    });

    it('routes meant to be cached keep their own Cache-Control', async () => {
      const cached: [string, string][] = [
        ['/v1/credentials/jwks', 'public, max-age=300'],
        ['/v1/plans', 'public, max-age=60'],
        ['/v1/pricing', 'public, max-age=60'],
        ['/.well-known/oauth-authorization-server', 'public, max-age=300'],
        ['/docs/static/swagger-ui.css', 'public, max-age=0'],
      ];
      for (const [url, expected] of cached) {
        const res = await inject({ method: 'GET', url });
        expect(res.statusCode, url).toBe(200);
        expect(res.headers['cache-control'], url).toBe(expected);
      }
    });
  });

  describe('Content-Security-Policy on every HTML page', () => {
    it("every HTML answer of every GET route carries a CSP with frame-ancestors 'none' and X-Frame-Options DENY", async () => {
      const html = new Map<string, string>();
      const urls = stack.routes
        .filter((r) => r.method === 'GET')
        .map((r) =>
          r.url.replace(/:[a-z_]+/g, 'cks_00000000000000000000').replace('*', 'oauth2-redirect.html'),
        );
      for (const url of [...urls, '/docs/', '/device?user_code=BCDF-GHJK']) {
        const res = await inject({ method: 'GET', url });
        const type = String(res.headers['content-type'] ?? '');
        if (!type.startsWith('text/html')) continue;
        const csp = String(res.headers['content-security-policy']);
        html.set(url, csp);
        expect(csp.split(/;\s*/), url).toContain("frame-ancestors 'none'");
        expect(res.headers['x-frame-options'], url).toBe('DENY');
        // Pages are never stored; the docs UI's static files keep @fastify/static's caching.
        if (!url.startsWith('/docs/static/')) expect(res.headers['cache-control'], url).toBe('no-store');
      }
      // The documentation UI, the verification page and the checkout page were among them.
      expect([...html.keys()]).toEqual(
        expect.arrayContaining(['/docs', '/docs/', '/device', '/billing/checkout/cks_00000000000000000000']),
      );
      expect(html.get('/docs')).toBe(DOCS_CSP);
      expect(html.get('/docs/static/oauth2-redirect.html')).toBe(DOCS_CSP);
      expect(html.get('/device')).toBe(PAGE_CSP);
      expect(html.get('/billing/checkout/cks_00000000000000000000')).toBe(PAGE_CSP);
    });

    it('the docs UI loads under its policy: its page names only same-origin scripts and styles', async () => {
      const res = await inject({ method: 'GET', url: '/docs/' });
      expect(res.statusCode).toBe(200);
      const sources = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? '');
      expect(sources.length).toBeGreaterThan(0);
      for (const source of sources) {
        expect(source, source).toMatch(/^\.\/static\//);
        const asset = await inject({ method: 'GET', url: `/docs/${source.slice(2)}` });
        expect(asset.statusCode, source).toBe(200);
      }
      // No inline script for the policy to block.
      expect(res.body).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    });
  });

  describe('HTTPS through a trusted proxy', () => {
    async function loginVia(remoteAddress: string, proto?: string) {
      const res = await inject({
        method: 'POST',
        url: '/admin/v1/auth/login',
        payload: OWNER,
        remoteAddress,
        headers: proto ? { 'x-forwarded-proto': proto } : {},
      });
      expect(res.statusCode, res.body).toBe(200);
      return {
        res,
        token: res.json<{ token: string }>().token,
        csrf: res.json<{ csrf_token: string }>().csrf_token,
        cookie: String(res.headers['set-cookie']),
      };
    }

    it('gives Strict-Transport-Security and the __Host-rp_session cookie (Secure, Path=/, no Domain)', async () => {
      const { res, token, cookie } = await loginVia(PROXY, 'https');
      expect(res.headers['strict-transport-security']).toBe(HSTS);
      expect(HSTS).toBe('max-age=31536000; includeSubDomains');
      const attributes = cookie.split('; ');
      expect(attributes[0]).toBe(`__Host-rp_session=${token}`);
      expect(attributes).toEqual(expect.arrayContaining(['Secure', 'Path=/', 'HttpOnly', 'SameSite=Strict']));
      expect(attributes.some((a) => /^domain=/i.test(a))).toBe(false);
      // Every answer over HTTPS has it, errors and pages included.
      for (const url of ['/healthz', '/admin/v1/projects', '/device']) {
        const other = await inject({ method: 'GET', url, ...VIA_PROXY });
        expect(other.headers['strict-transport-security'], url).toBe(HSTS);
      }
    });

    it("an untrusted peer's X-Forwarded-Proto: https changes nothing (no HSTS, the plain cookie)", async () => {
      for (const [remoteAddress, proto] of [
        [STRANGER, 'https'],
        [PROXY, undefined],
        [PROXY, 'http'],
      ] as const) {
        const { res, token, cookie } = await loginVia(remoteAddress, proto);
        const what = `${remoteAddress} ${proto}`;
        expect(res.headers['strict-transport-security'], what).toBeUndefined();
        const attributes = cookie.split('; ');
        expect(attributes[0], what).toBe(`rp_session=${token}`);
        expect(attributes, what).not.toContain('Secure');
      }
    });

    it('over HTTPS only __Host-rp_session authenticates; over HTTP only rp_session', async () => {
      const { token, csrf } = await loginVia(PROXY, 'https');
      const session = (cookie: string, https: boolean) =>
        inject({
          method: 'GET',
          url: '/admin/v1/auth/session',
          remoteAddress: PROXY,
          headers: { cookie, ...(https ? { 'x-forwarded-proto': 'https' } : {}) },
        });
      const secure = await session(`__Host-rp_session=${token}`, true);
      expect(secure.statusCode, secure.body).toBe(200);
      expect(secure.json()).toMatchObject({ authenticated_by: 'cookie', csrf_token: csrf });
      // A plain cookie over HTTPS may have been planted by anyone who can set cookies for the host.
      expect((await session(`rp_session=${token}`, true)).statusCode).toBe(401);
      expect((await session(`__Host-rp_session=${token}`, false)).statusCode).toBe(401);
      expect((await session(`rp_session=${token}`, false)).statusCode).toBe(200);
      // The verification page reads the same cookie.
      const page = await inject({
        method: 'GET',
        url: '/device',
        ...VIA_PROXY,
        headers: { ...VIA_PROXY.headers, cookie: `__Host-rp_session=${token}` },
      });
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain(`Logged in as <b>${OWNER.email}</b>`);
    });

    it('the CSRF check and logout use the __Host- cookie over HTTPS; logout also expires a stale rp_session', async () => {
      const { token, csrf } = await loginVia(PROXY, 'https');
      const cookie = `__Host-rp_session=${token}; rp_session=stale`;
      const refused = await inject({
        method: 'POST',
        url: '/admin/v1/projects',
        ...VIA_PROXY,
        headers: { ...VIA_PROXY.headers, cookie },
        payload: { name: 'no-csrf' },
      });
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toEqual({ error: 'missing or invalid CSRF token' });
      const logout = await inject({
        method: 'POST',
        url: '/admin/v1/auth/logout',
        ...VIA_PROXY,
        headers: { ...VIA_PROXY.headers, cookie, 'x-csrf-token': csrf },
      });
      expect(logout.statusCode, logout.body).toBe(204);
      const cleared = [logout.headers['set-cookie']].flat().map((c) => String(c).split('; '));
      expect(cleared.map((c) => c[0])).toEqual(['__Host-rp_session=', 'rp_session=']);
      for (const attributes of cleared) {
        expect(attributes).toEqual(expect.arrayContaining(['Max-Age=0', 'Path=/', 'Secure', 'HttpOnly']));
      }
      const after = await inject({
        method: 'GET',
        url: '/admin/v1/auth/session',
        ...VIA_PROXY,
        headers: { ...VIA_PROXY.headers, cookie: `__Host-rp_session=${token}` },
      });
      expect(after.statusCode).toBe(401);
    });
  });

  describe('access log', () => {
    it('never shows a checkout capability URL in full', async () => {
      const id = 'cks_0123456789abcdefghij';
      const requestIds = [
        'hardening-checkout-get',
        'hardening-checkout-post',
        'hardening-checkout-return',
      ] as const;
      const from = lines.length;
      await inject({
        method: 'GET',
        url: `/billing/checkout/${id}`,
        headers: { 'x-request-id': requestIds[0] },
      });
      await inject({
        method: 'POST',
        url: `/billing/checkout/${id}`,
        headers: { 'x-request-id': requestIds[1] },
      });
      await inject({
        method: 'GET',
        url: `/billing/checkout/${id}?result=success`,
        headers: { 'x-request-id': requestIds[2] },
      });
      const logged = lines.slice(from).map((l) => JSON.parse(l) as LogLine);
      const incoming = logged.filter(
        (l) =>
          l.msg === 'incoming request' && (requestIds as readonly (string | undefined)[]).includes(l.reqId),
      );
      expect(incoming.map((l) => [l.req?.method, l.req?.url])).toEqual([
        ['GET', '/billing/checkout/[redacted]'],
        ['POST', '/billing/checkout/[redacted]'],
        ['GET', '/billing/checkout/[redacted]?result=success'],
      ]);
      expect(lines.slice(from).join('\n')).not.toContain(id.slice(4));
      // Other URLs are logged as they are.
      const before = lines.length;
      await inject({ method: 'GET', url: '/v1/plans', headers: { 'x-request-id': 'hardening-plans' } });
      const plans = lines
        .slice(before)
        .map((l) => JSON.parse(l) as LogLine)
        .find((l) => l.msg === 'incoming request' && l.reqId === 'hardening-plans');
      expect(plans?.req?.url).toBe('/v1/plans');
    });
  });
});
