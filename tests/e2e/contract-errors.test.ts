/**
 * Every 401, 402, 403, 404, 409, 422 and 429 the contract names (spec sections Authentication,
 * Errors and Limits), end to end: the four apps as separate processes on PostgreSQL and Redis,
 * each case one row of a table, reached through the gateway with its exact status and exact
 * `{"error": "..."}` body (docs/errors.md, "Contract cases"). Every response is also checked
 * against the gateway's OpenAPI document by the `Api` client.
 *
 * One system start. The environment shrinks what would otherwise take many requests to reach:
 * the free plan's limits (plans file), the per-account login limit and the checkout throttle.
 *
 * Where a case is reached by something other than API calls alone, or is answered differently
 * than the contract's words suggest, the row says so:
 * - Expired session cookie: sessions live at least 300 s (ADMIN_SESSION_TTL_SECONDS minimum) and
 *   the services' clocks cannot be driven from here, so the session's `expires_at` is moved into
 *   the past in admin's own table (`admin.sessions`) — the gateway and admin then decide as they
 *   would for a session that ran out. A logged-out session's cookie is a second row (API only).
 * - Cross-tenant access: another tenant's project, key or credential answers 404, as for an id
 *   that does not exist (PRODUCT.md, Identity and access: "Resources of another tenant: 404");
 *   the 403 the contract names is switching the session into a tenant one is not a member of.
 * - Not reached here: an *expired* (rather than revoked) relay credential at
 *   GET /v1/relays/assignment — the shortest credential lives 60 s (ttl_seconds minimum), which
 *   would double this file's run time; the contract names only the revoked one.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, type ApiResponse } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';

const OWNER = { email: 'contract-ops@example.test', password: 'contract errors password' };
const PASSWORD = 'tenant password 123';
const LOGIN_MAX_PER_ACCOUNT = 3;
const LOGIN_WINDOW_SECONDS = 600;
const CHECKOUT_WINDOW_SECONDS = 600;

/** Well-formed ids nobody was given: "does not exist" rather than "malformed". */
const UNKNOWN_PROJECT = `prj_${'0'.repeat(20)}`;
const UNKNOWN_TENANT = `ten_${'0'.repeat(20)}`;

const INVALID_TOKEN = 'invalid or expired token';
const FREE_CONNECTIONS =
  'the free plan allows at most 2 concurrent connections (max_concurrent_connections); upgrade the plan to open more';
const FREE_API_KEYS =
  'the free plan allows at most 2 active API keys (max_api_keys); upgrade the plan to create more';
const FREE_PROJECTS =
  'the free plan allows at most 2 projects (max_projects); upgrade the plan to create more';
const FREE_ALLOWLIST =
  'the free plan allows at most 3 allowlist entries per project (max_allowlist_entries); upgrade the plan to add more';
const API_KEY_REFUSED = 'API keys authenticate credential issuance only; this operation needs a bearer token';
const IDENTITY_CALLER =
  'identity tokens can be created with a user session or an identity token only; bot tokens are not accepted';
const USER_ONLY = 'this operation needs a user session; bot tokens and identity tokens are not accepted';

function plansFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
  writeFileSync(
    path,
    [
      'plans:',
      '  free:',
      '    limits: { max_concurrent_connections: 2, max_api_keys: 2, max_projects: 2, max_bots: 2, max_allowlist_entries: 3 }',
      '',
    ].join('\n'),
  );
  return path;
}

/** A checksum-valid token with its last hex digit changed: same shape, wrong CRC-32. */
function breakChecksum(token: string): string {
  const last = token.at(-1) === '0' ? '1' : '0';
  return token.slice(0, -1) + last;
}

interface Row {
  status: 401 | 402 | 403 | 404 | 409 | 422 | 429;
  /** The contract line the row reaches. */
  contract: string;
  /** The case, as the test names it. */
  name: string;
  send: () => Promise<ApiResponse>;
  /** The exact message; a function when it carries a value only the response knows (Retry-After). */
  error: string | ((res: ApiResponse) => string);
  /** The row needs a Retry-After header (429). */
  retryAfter?: boolean;
}

describe('contract error cases, end to end over four processes', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;

  // What beforeAll builds; the rows only send one request each.
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const s = {
    /** Tenant A (free): owner session, projects p and q, key ka in p (at the key limit with kb in q). */
    a: { token: '', tenantId: '', p: '', q: '', ka: '', kaId: '', kb: '' },
    /** Tenant B (free): owner session in B, a second session of the same user switched into A as viewer. */
    b: { token: '', viewerToken: '', project: '', revokedKey: '' },
    /** A viewer bot of A's project p: its bot token and an identity token of it. */
    bot: { id: '', token: '', identityToken: '' },
    /** A credential of ka, revoked; another, live (its jti is A's). */
    revokedCredential: '',
    liveJti: '',
    platform: { token: '', tenantId: '' },
    /** Cookies of A's owner: a live one, a logged-out one, one whose session expired. */
    cookie: { live: '', loggedOut: '', expired: '' },
    /** The token of that expired session, to send as a bearer token. */
    expiredToken: '',
    throttledEmail: '',
  };

  const issue = (key: string, body: object = {}) =>
    api.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body });

  async function signup(label: string): Promise<{ email: string; token: string; tenantId: string }> {
    const email = `${label}@example.test`;
    const res = await api.request('POST', '/admin/v1/auth/signup', {
      body: { email, password: PASSWORD, tenant_name: label },
    });
    expect(res.status, `signup ${label}`).toBe(201);
    return { email, token: await login(email), tenantId: res.body.tenant.id };
  }

  async function login(email: string, password = PASSWORD): Promise<string> {
    const res = await api.request('POST', '/admin/v1/auth/login', { body: { email, password } });
    expect(res.status, `login ${email}`).toBe(200);
    return res.body.token;
  }

  async function created(res: Promise<ApiResponse>, what: string): Promise<ApiResponse> {
    const r = await res;
    expect(r.status, `${what}: ${r.text}`).toBe(201);
    return r;
  }

  beforeAll(async () => {
    database = await createTestDatabase('e2e_contract_errors');
    redis = createTestRedis('e2e_contract_errors');
    system = await startDistributed({
      label: 'contract-errors',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 11).toString('base64'),
      bootstrap: OWNER,
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plansFile(),
        // Every request of this file comes from 127.0.0.1: the account-and-IP limit is the one that
        // bites (a success clears it); the per-IP and the account-wide ones (which count successes
        // too: tenant A's owner logs in several times) must not.
        ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP: String(LOGIN_MAX_PER_ACCOUNT),
        ADMIN_LOGIN_MAX_PER_ACCOUNT: '10000',
        ADMIN_LOGIN_WINDOW_SECONDS: String(LOGIN_WINDOW_SECONDS),
        ADMIN_LOGIN_MAX_PER_IP: '10000',
        BILLING_CHECKOUT_MAX_PER_WINDOW: '1',
        BILLING_CHECKOUT_WINDOW_SECONDS: String(CHECKOUT_WINDOW_SECONDS),
        // B's first checkout (pro) goes through the built-in provider.
        BILLING_BUILTIN_PAID_CHECKOUT: 'true',
      },
    });
    api = await Api.connect(system.baseUrl);

    // The platform admin (bootstrap owner, enterprise tenant).
    s.platform.token = await login(OWNER.email, OWNER.password);
    const platformSession = await api.request('GET', '/admin/v1/auth/session', {
      headers: bearer(s.platform.token),
    });
    s.platform.tenantId = platformSession.body.tenant.id;

    // Tenant A at its free limits: 2 projects, 2 API keys, 3 allowlist entries on q, 2 live credentials.
    const a = await signup('tenant-a');
    s.a.token = a.token;
    s.a.tenantId = a.tenantId;
    const auth = bearer(a.token);
    s.a.p = (
      await created(api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } }), 'p')
    ).body.id;
    s.a.q = (
      await created(api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'q' } }), 'q')
    ).body.id;
    const ka = await created(
      api.request('POST', `/admin/v1/projects/${s.a.p}/api-keys`, {
        headers: auth,
        body: { scopes: ['relay:session'] },
      }),
      'key ka',
    );
    s.a.ka = ka.body.key;
    s.a.kaId = ka.body.api_key.id;
    // q's allowlist (none of it 127.0.0.1) exists before kb is first used, so no cache holds an older list.
    for (const cidr of ['10.0.0.0/8', '192.168.0.0/16', '2001:db8::/32']) {
      await created(
        api.request('POST', `/admin/v1/projects/${s.a.q}/allowlist`, { headers: auth, body: { cidr } }),
        `allowlist ${cidr}`,
      );
    }
    s.a.kb = (
      await created(
        api.request('POST', `/admin/v1/projects/${s.a.q}/api-keys`, { headers: auth, body: {} }),
        'key kb',
      )
    ).body.key;

    // Two credentials fill the cap of 2; revoking one frees its slot, a third fills it again.
    const first = await created(issue(s.a.ka), 'credential 1');
    s.liveJti = (await created(issue(s.a.ka), 'credential 2')).body.jti;
    expect(
      (await api.request('POST', `/admin/v1/credentials/${first.body.jti}/revoke`, { headers: auth })).status,
    ).toBe(200);
    s.revokedCredential = first.body.token;
    await created(issue(s.a.ka), 'credential 3');

    // A viewer bot of p, its bot token, and an identity token of it (projects:read only).
    s.bot.id = (
      await created(
        api.request('POST', `/admin/v1/projects/${s.a.p}/bots`, {
          headers: auth,
          body: { name: 'reader', role: 'viewer' },
        }),
        'bot',
      )
    ).body.id;
    s.bot.token = (
      await created(
        api.request('POST', `/admin/v1/projects/${s.a.p}/bots/${s.bot.id}/keys`, { headers: auth }),
        'bot key',
      )
    ).body.token;
    const identity = await api.request('POST', `/v1/projects/${s.a.p}/identities/${s.bot.id}/tokens`, {
      headers: auth,
      body: { scopes: ['projects:read'] },
    });
    // Identity tokens are new work: a failure here is reported by the rows that need the token.
    if (identity.status === 201) s.bot.identityToken = identity.body.value;

    // Tenant B: its own project and a revoked key; its owner is also a viewer of A.
    const b = await signup('tenant-b');
    s.b.token = b.token;
    s.b.project = (
      await created(
        api.request('POST', '/admin/v1/projects', { headers: bearer(b.token), body: { name: 'bp' } }),
        'bp',
      )
    ).body.id;
    const kb = await created(
      api.request('POST', `/admin/v1/projects/${s.b.project}/api-keys`, {
        headers: bearer(b.token),
        body: {},
      }),
      'B key',
    );
    expect(
      (
        await api.request('DELETE', `/admin/v1/projects/${s.b.project}/api-keys/${kb.body.api_key.id}`, {
          headers: bearer(b.token),
        })
      ).status,
    ).toBe(200);
    s.b.revokedKey = kb.body.key;
    await created(
      api.request('POST', '/admin/v1/members', { headers: auth, body: { email: b.email, role: 'viewer' } }),
      'B as viewer of A',
    );
    s.b.viewerToken = await login(b.email);
    const switched = await api.request('POST', '/admin/v1/auth/session/tenant', {
      headers: bearer(s.b.viewerToken),
      body: { tenant_id: s.a.tenantId },
    });
    expect(switched.status, switched.text).toBe(200);
    expect(switched.body.role).toBe('viewer');

    // Cookies of A's owner. ADMIN_SESSION_TTL_SECONDS is at least 300 s, so an expired session
    // is made by moving its expiry into the past in admin's own table.
    s.cookie.live = `rp_session=${await login(a.email)}`;
    const loggedOut = await login(a.email);
    expect(
      (await api.request('POST', '/admin/v1/auth/logout', { headers: bearer(loggedOut) })).status,
    ).toBeLessThan(300);
    s.cookie.loggedOut = `rp_session=${loggedOut}`;
    const expired = await login(a.email);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const hash = createHash('sha256').update(expired).digest('hex');
      const res = await client.query(
        `update admin.sessions set expires_at = now() - interval '1 second' where token_hash = $1`,
        [hash],
      );
      expect(res.rowCount).toBe(1);
    } finally {
      await client.end();
    }
    s.cookie.expired = `rp_session=${expired}`;
    s.expiredToken = expired;

    // An account with LOGIN_MAX_PER_ACCOUNT failed attempts: the next one is over the limit.
    s.throttledEmail = (await signup('throttled')).email;
    for (let i = 0; i < LOGIN_MAX_PER_ACCOUNT; i++) {
      const wrong = await api.request('POST', '/admin/v1/auth/login', {
        body: { email: s.throttledEmail, password: 'wrong password 123' },
      });
      expect(wrong.status).toBe(401);
    }

    // B's one checkout session of the window.
    await created(
      api.request('POST', '/admin/v1/billing/checkout-sessions', {
        headers: bearer(b.token),
        body: { plan: 'pro' },
      }),
      'first checkout session',
    );
  }, 120_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(codes.every((c) => c === 0)).toBe(true);
  });

  const rows: Row[] = [
    // 401 — Authentication rule 5 / Errors 401: no API key, expired session cookie, revoked JWT
    // credential, unknown token prefix (docs/iam.md adds malformed token and bad checksum).
    {
      status: 401,
      contract: 'Errors 401 "No API key"',
      name: 'no X-API-Key at POST /api/v1/credentials',
      send: () => api.request('POST', '/api/v1/credentials', { body: {} }),
      error: 'missing API key: send "X-API-Key: svc_live_…"',
    },
    {
      status: 401,
      contract: 'Errors 401 "Missing or invalid credentials"',
      name: 'malformed API key',
      send: () => issue('svc_live_nothex'),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "Missing or invalid credentials"',
      name: 'unknown API key',
      send: () => issue(`svc_test_${'f'.repeat(64)}`),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "Missing or invalid credentials"',
      name: 'revoked API key',
      send: () => issue(s.b.revokedKey),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "expired session cookie"',
      name: 'session cookie whose session has expired',
      send: () => api.request('GET', '/admin/v1/auth/session', { headers: { cookie: s.cookie.expired } }),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "expired session cookie"',
      name: 'session cookie of a logged-out session',
      send: () => api.request('GET', '/admin/v1/auth/session', { headers: { cookie: s.cookie.loggedOut } }),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "Missing or invalid credentials"',
      name: 'bearer session token whose session has expired',
      send: () =>
        api.request('GET', '/admin/v1/projects', {
          headers: bearer(s.expiredToken),
        }),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "revoked JWT credential"',
      name: 'revoked relay credential at GET /v1/relays/assignment',
      send: () => api.request('GET', '/v1/relays/assignment', { headers: bearer(s.revokedCredential) }),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "unknown token prefix"',
      name: 'bearer token with an unknown prefix at GET /admin/v1/projects',
      send: () =>
        api.request('GET', '/admin/v1/projects', {
          headers: bearer(`rpx_${'a'.repeat(64)}${'0'.repeat(8)}`),
        }),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "Missing or invalid credentials"',
      name: 'user session token with a wrong checksum',
      send: () => api.request('GET', '/admin/v1/projects', { headers: bearer(breakChecksum(s.a.token)) }),
      error: INVALID_TOKEN,
    },
    {
      status: 401,
      contract: 'Errors 401 "Missing or invalid credentials"',
      name: 'no bearer token at GET /admin/v1/projects',
      send: () => api.request('GET', '/admin/v1/projects'),
      error: 'missing bearer token: send "Authorization: Bearer <token>"',
    },
    {
      status: 401,
      contract: 'Errors 401 "Missing or invalid credentials"',
      name: 'wrong password at login',
      send: () =>
        api.request('POST', '/admin/v1/auth/login', {
          body: { email: OWNER.email, password: 'not the password' },
        }),
      error: 'invalid email or password',
    },

    // 402 — Limits: per-plan concurrent connection cap; plan-level API key limit.
    {
      status: 402,
      contract: 'Limits "Per-plan concurrent connection cap"',
      name: 'third live credential on a cap of 2',
      send: () => issue(s.a.ka),
      error: FREE_CONNECTIONS,
    },
    {
      status: 402,
      contract: 'Limits "Plan-level API key limit"',
      name: 'third active API key on a limit of 2',
      send: () =>
        api.request('POST', `/admin/v1/projects/${s.a.p}/api-keys`, { headers: bearer(s.a.token), body: {} }),
      error: FREE_API_KEYS,
    },

    // 403 — Authentication rules 2, 3, 4 / Errors 403.
    {
      status: 403,
      contract: 'Errors 403 "Insufficient IAM permissions"',
      name: 'a viewer creating an API key',
      send: () =>
        api.request('POST', `/admin/v1/projects/${s.a.p}/api-keys`, {
          headers: bearer(s.b.viewerToken),
          body: {},
        }),
      error: 'your role (viewer) does not grant permission api_keys:write',
    },
    {
      status: 403,
      contract: 'Errors 403 "Insufficient IAM permissions"',
      name: 'a viewer bot creating an API key',
      send: () =>
        api.request('POST', `/admin/v1/projects/${s.a.p}/api-keys`, {
          headers: bearer(s.bot.token),
          body: {},
        }),
      error: "the bot's role (viewer) does not grant permission api_keys:write",
    },
    {
      status: 403,
      contract: 'Errors 403 "Insufficient IAM permissions"',
      name: 'an identity token (projects:read) creating an API key',
      send: () =>
        api.request('POST', `/admin/v1/projects/${s.a.p}/api-keys`, {
          headers: bearer(s.bot.identityToken),
          body: {},
        }),
      error: "the identity token's scopes do not grant permission api_keys:write",
    },
    {
      status: 403,
      contract: 'Errors 403 "Insufficient IAM permissions"',
      name: 'a bot token creating a project (tenant-wide permission)',
      send: () =>
        api.request('POST', '/admin/v1/projects', { headers: bearer(s.bot.token), body: { name: 'by-bot' } }),
      error: 'permission projects:write is not available to bots or identity tokens; use a user session',
    },
    {
      status: 403,
      contract: 'Errors 403 "Insufficient IAM permissions"',
      name: "a tenant owner setting a tenant's plan (platform admins only)",
      send: () =>
        api.request('PUT', `/admin/v1/tenants/${s.a.tenantId}/plan`, {
          headers: bearer(s.a.token),
          body: { plan: 'pro' },
        }),
      error: 'this operation needs a platform administrator',
    },
    {
      status: 403,
      contract: 'Errors 403 "scope not granted to the API key"',
      name: 'relay:publish asked with a relay:session key',
      send: () => issue(s.a.ka, { scopes: ['relay:publish'] }),
      error: 'scope "relay:publish" is not granted to this API key',
    },
    {
      status: 403,
      contract: 'Errors 403 "IP allowlist block"',
      name: "127.0.0.1 outside the project's allowlist",
      send: () => issue(s.a.kb),
      error: "your IP address is not in this project's allowlist",
    },
    {
      status: 403,
      contract: 'Authentication rule 3 / Errors 403 "missing CSRF token"',
      name: 'cookie-authenticated POST /admin/v1/projects without X-CSRF-Token',
      send: () =>
        api.request('POST', '/admin/v1/projects', {
          headers: { cookie: s.cookie.live },
          body: { name: 'csrf' },
        }),
      error: 'missing or invalid CSRF token',
    },
    {
      status: 403,
      contract: 'Errors 403 "cross-tenant access denied"',
      name: 'switching the session to a tenant the user is not a member of',
      send: () =>
        api.request('POST', '/admin/v1/auth/session/tenant', {
          headers: bearer(s.b.token),
          body: { tenant_id: s.platform.tenantId },
        }),
      error: 'you are not a member of that tenant',
    },
    {
      status: 403,
      contract: 'Authentication rule 2 "Relay Keys are rejected"',
      name: 'identity token creation with an API key',
      send: () =>
        api.request('POST', `/v1/projects/${s.a.p}/identities/${s.bot.id}/tokens`, {
          headers: { 'x-api-key': s.a.ka },
          body: { scopes: ['projects:read'] },
        }),
      error: API_KEY_REFUSED,
    },
    {
      status: 403,
      contract: 'Authentication rule 2 "a user session or Identity Token only"',
      name: 'identity token creation with a bot token',
      send: () =>
        api.request('POST', `/v1/projects/${s.a.p}/identities/${s.bot.id}/tokens`, {
          headers: bearer(s.bot.token),
          body: { scopes: ['projects:read'] },
        }),
      error: IDENTITY_CALLER,
    },
    {
      status: 403,
      contract: 'Errors 403 "principal lacks permission"',
      name: 'a bot token on a user-only route (POST /admin/v1/auth/logout)',
      send: () => api.request('POST', '/admin/v1/auth/logout', { headers: bearer(s.bot.token) }),
      error: USER_ONLY,
    },
    {
      status: 403,
      contract: 'Errors 403 "principal lacks permission"',
      name: 'an identity token on a user-only route (POST /admin/v1/auth/session/tenant)',
      send: () =>
        api.request('POST', '/admin/v1/auth/session/tenant', {
          headers: bearer(s.bot.identityToken),
          body: { tenant_id: s.a.tenantId },
        }),
      error: USER_ONLY,
    },
    {
      status: 403,
      contract: 'Errors 403 "principal lacks permission"',
      name: 'an API key on a bearer route (GET /admin/v1/projects)',
      send: () => api.request('GET', '/admin/v1/projects', { headers: { 'x-api-key': s.a.ka } }),
      error: API_KEY_REFUSED,
    },

    // 404 — Errors 404: tenant, project or key not found, or owned by a different tenant.
    {
      status: 404,
      contract: 'Errors 404 "project not found"',
      name: 'a project id nobody was given',
      send: () =>
        api.request('GET', `/admin/v1/projects/${UNKNOWN_PROJECT}/api-keys`, { headers: bearer(s.a.token) }),
      error: 'project not found',
    },
    {
      status: 404,
      contract: 'Errors 404 "owned by a different tenant" (project)',
      name: "tenant B reading tenant A's project",
      send: () => api.request('GET', `/admin/v1/projects/${s.a.p}/api-keys`, { headers: bearer(s.b.token) }),
      error: 'project not found',
    },
    {
      status: 404,
      contract: 'Errors 404 "owned by a different tenant" (key)',
      name: "tenant B revoking tenant A's API key under its own project",
      send: () =>
        api.request('DELETE', `/admin/v1/projects/${s.b.project}/api-keys/${s.a.kaId}`, {
          headers: bearer(s.b.token),
        }),
      error: 'API key not found',
    },
    {
      status: 404,
      contract: 'Errors 404 "owned by a different tenant" (credential)',
      name: "tenant B revoking tenant A's credential jti",
      send: () =>
        api.request('POST', `/admin/v1/credentials/${s.liveJti}/revoke`, { headers: bearer(s.b.token) }),
      error: 'credential not found',
    },
    {
      status: 404,
      contract: 'Errors 404 "Tenant ... not found"',
      name: 'platform admin setting the plan of an unknown tenant',
      send: () =>
        api.request('PUT', `/admin/v1/tenants/${UNKNOWN_TENANT}/plan`, {
          headers: bearer(s.platform.token),
          body: { plan: 'pro' },
        }),
      error: 'tenant not found',
    },

    // 409 — Errors 409 / Resources: duplicate project name, duplicate CIDR.
    {
      status: 409,
      contract: 'Errors 409 "Duplicate project name"',
      name: 'a second project named p',
      send: () =>
        api.request('POST', '/admin/v1/projects', { headers: bearer(s.a.token), body: { name: 'p' } }),
      error: 'a project named "p" already exists',
    },
    {
      status: 409,
      contract: 'Errors 409 "duplicate CIDR in an allowlist"',
      name: '10.0.0.0/8 again, written as 10.1.2.3/8',
      send: () =>
        api.request('POST', `/admin/v1/projects/${s.a.q}/allowlist`, {
          headers: bearer(s.a.token),
          body: { cidr: '10.1.2.3/8' },
        }),
      error: '10.0.0.0/8 is already in the allowlist',
    },

    // 422 — Errors 422 / Limits: invalid CIDR notation; plan limits on Free-plan features.
    {
      status: 422,
      contract: 'Errors 422 "Invalid CIDR notation"',
      name: 'a prefix length over 32',
      send: () =>
        api.request('POST', `/admin/v1/projects/${s.a.q}/allowlist`, {
          headers: bearer(s.a.token),
          body: { cidr: '10.0.0.0/33' },
        }),
      error: 'invalid CIDR "10.0.0.0/33": the prefix length must be 0 to 32 for IPv4',
    },
    {
      status: 422,
      contract: 'Limits "Plan limits on Free-plan features" (projects)',
      name: 'a third project on a free limit of 2',
      send: () =>
        api.request('POST', '/admin/v1/projects', { headers: bearer(s.a.token), body: { name: 'r' } }),
      error: FREE_PROJECTS,
    },
    {
      status: 422,
      contract: 'Limits "Plan limits on Free-plan features" (allowlist entries)',
      name: 'a fourth allowlist entry on a free limit of 3',
      send: () =>
        api.request('POST', `/admin/v1/projects/${s.a.q}/allowlist`, {
          headers: bearer(s.a.token),
          body: { cidr: '172.16.0.0/12' },
        }),
      error: FREE_ALLOWLIST,
    },

    // 429 — Errors 429 / Limits: login attempts over the limit; checkout creation throttled.
    {
      status: 429,
      contract: 'Limits "Login attempt rate limit"',
      name: `attempt ${LOGIN_MAX_PER_ACCOUNT + 1} on one account, right password included`,
      send: () =>
        api.request('POST', '/admin/v1/auth/login', {
          body: { email: s.throttledEmail, password: PASSWORD },
        }),
      error: 'too many login attempts; retry later',
      retryAfter: true,
    },
    {
      status: 429,
      contract: 'Limits "Payment checkout session creation throttle"',
      name: 'a second checkout session in the window of 1',
      send: () =>
        api.request('POST', '/admin/v1/billing/checkout-sessions', {
          headers: bearer(s.b.token),
          body: { plan: 'pro' },
        }),
      error: (res) =>
        `too many checkout sessions for this tenant; retry in ${res.headers.get('retry-after')} seconds`,
      retryAfter: true,
    },
  ];

  it.each(rows.map((row) => [`${row.status} ${row.contract}: ${row.name}`, row] as const))(
    '%s',
    async (_, row) => {
      const res = await row.send();
      expect(res.status, res.text).toBe(row.status);
      expect(Object.keys(res.body ?? {})).toEqual(['error']);
      expect(res.body).toEqual({ error: typeof row.error === 'string' ? row.error : row.error(res) });
      if (row.retryAfter) {
        const seconds = Number(res.headers.get('retry-after'));
        expect(Number.isInteger(seconds) && seconds > 0 && seconds <= 600, `Retry-After ${seconds}`).toBe(
          true,
        );
      }
    },
  );

  it('checked every response against the OpenAPI document', () => {
    expect(api.checked).toBeGreaterThanOrEqual(rows.length);
  });
});
