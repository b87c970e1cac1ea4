import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PrincipalKind } from '@relayplane/proto/admin';
import {
  can,
  deniedMessage,
  PERMISSIONS,
  type Permission,
  PROJECT_PERMISSIONS,
  type Subject,
} from '@relayplane/shared/iam';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServedRoute } from '../src/app.ts';
import { ROUTES } from './support/routes.ts';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

const IDENTITY_TOKEN_CREATION = 'POST /v1/projects/:project_id/identities/:identity_id/tokens';
const key = (r: { method: string; url: string }) => `${r.method} ${r.url}`;
const openApiPath = (url: string) => url.replace(/:([A-Za-z_]+)/g, '{$1}');

/**
 * Bearer routes that check no tenant permission, each with the reason. Everything else under
 * /admin/v1 and /v1/projects must carry a permission guard: a new route without one fails here.
 */
const NO_TENANT_PERMISSION: Record<string, string> = {
  'GET /admin/v1/auth/session': "the caller's own session",
  'POST /admin/v1/auth/logout': "ends the caller's own session",
  'GET /admin/v1/auth/sessions': "the caller's own sessions and CLI tokens",
  'DELETE /admin/v1/auth/sessions/:id': "ends one of the caller's own sessions (another user's: 404)",
  'POST /admin/v1/auth/sessions/revoke-others': "ends the caller's own other sessions",
  'POST /admin/v1/auth/password': "the caller's own password, proven by the current one",
  'POST /admin/v1/auth/session/tenant': "moves the caller's own session (membership checked)",
  'GET /admin/v1/auth/tenants': "the caller's own memberships",
  'POST /admin/v1/auth/device/approve': 'the caller approves a device for themselves',
  'POST /admin/v1/auth/login': 'public: how a session starts',
  'POST /admin/v1/auth/login/mfa': "public: a login's second step (its mfa_token proves the password)",
  'GET /admin/v1/auth/mfa': "the caller's own second factor",
  'POST /admin/v1/auth/mfa/totp': "the caller's own second factor",
  'POST /admin/v1/auth/mfa/totp/confirm': "the caller's own second factor",
  'DELETE /admin/v1/auth/mfa/totp': "the caller's own second factor, proven by a code or the password",
  'POST /admin/v1/auth/mfa/recovery-codes': "the caller's own second factor, proven by a code",
  'GET /admin/v1/tenant/settings': "any member reads the session's tenant settings",
  'PATCH /admin/v1/tenant/settings': 'the tenant owner (admin checks the role)',
  'POST /admin/v1/auth/signup': 'public: a new tenant',
  'POST /admin/v1/auth/device/code': 'public OAuth client (RFC 8628)',
  'POST /admin/v1/auth/token': 'public OAuth client (RFC 8628)',
  'POST /admin/v1/tenants': 'platform administrators',
  'GET /admin/v1/tenants': 'platform administrators',
  'PUT /admin/v1/tenants/:tenant_id/plan': 'platform administrators',
  'GET /admin/v1/relays': 'platform administrators',
  'POST /admin/v1/relays': 'platform administrators',
  'DELETE /admin/v1/relays/:relay_id': 'platform administrators',
  'GET /admin/v1/signing-keys': 'platform administrators',
  'POST /admin/v1/signing-keys/rotate': 'platform administrators',
  'POST /admin/v1/signing-keys/:kid/revoke': 'platform administrators',
};

/** The route table of docs/iam.md: `METHOD /path` → permission. */
function documentedRoutes(): Map<string, string> {
  const doc = readFileSync(fileURLToPath(new URL('../../../docs/iam.md', import.meta.url)), 'utf8');
  const lines = doc.split('\n');
  const header = lines.findIndex((l) => l.startsWith('| method | route | permission |'));
  if (header < 0) throw new Error('docs/iam.md has no table starting with "| method | route | permission |"');
  const rows = new Map<string, string>();
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const [method = '', route = '', permission = ''] = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim().replaceAll('`', ''));
    rows.set(`${method} ${route}`, permission);
  }
  return rows;
}

describe('IAM: every admin route checks a permission, and no principal reaches another tenant', () => {
  let stack: Stack;
  let seq = 0;
  const guarded = () =>
    stack.routes.filter((r): r is ServedRoute & { permission: Permission } => !!r.permission);

  async function call(
    method: string,
    url: string,
    headers: Record<string, string>,
    payload?: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await stack.app.inject({
      method: method as 'GET',
      url,
      headers,
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
    return { status: res.statusCode, body: res.body ? res.json() : {} };
  }

  /** A user with a tenant of their own (free plan), logged in. */
  const signup = (label: string) => tenant(stack, { email: `${label}-${++seq}@example.test`, name: label });

  /** Everything a tenant can own, created through the API: ids for every path parameter. */
  async function populate(label: string) {
    const owner = await signup(label);
    const project = await call('POST', '/admin/v1/projects', owner.auth, { name: 'main' });
    expect(project.status).toBe(201);
    const projectId = project.body.id as string;
    const base = `/admin/v1/projects/${projectId}`;
    const apiKey = await call('POST', `${base}/api-keys`, owner.auth, {});
    expect(apiKey.status).toBe(201);
    const entry = await call('POST', `${base}/allowlist`, owner.auth, { cidr: '0.0.0.0/0' });
    expect(entry.status).toBe(201);
    const bot = await call('POST', `${base}/bots`, owner.auth, { name: 'deployer' });
    expect(bot.status).toBe(201);
    const botId = bot.body.id as string;
    const botKey = await call('POST', `${base}/bots/${botId}/keys`, owner.auth);
    expect(botKey.status).toBe(201);
    const identity = await call('POST', `/v1/projects/${projectId}/identities/${botId}/tokens`, owner.auth, {
      scopes: [...PROJECT_PERMISSIONS],
    });
    expect(identity.status).toBe(201);
    const credential = await call(
      'POST',
      '/api/v1/credentials',
      { 'x-api-key': apiKey.body.key as string },
      { ttl_seconds: 600 },
    );
    expect(credential.status).toBe(201);
    const member = await signup(`${label}-member`);
    expect(
      (await call('POST', '/admin/v1/members', owner.auth, { email: member.email, role: 'viewer' })).status,
    ).toBe(201);
    return {
      owner,
      member,
      botToken: { authorization: `Bearer ${botKey.body.token}` },
      identityToken: { authorization: `Bearer ${identity.body.value}` },
      params: {
        project_id: projectId,
        key_id: (apiKey.body.api_key as { id: string }).id,
        entry_id: entry.body.id as string,
        bot_id: botId,
        identity_id: botId,
        token_id: identity.body.id as string,
        user_id: member.userId,
        jti: credential.body.jti as string,
      } as Record<string, string>,
    };
  }

  /** A principal of `tenant`'s with `role`: a user added as a member, switched to that tenant. */
  async function memberWithRole(owner: { auth: Record<string, string> }, tenantId: string, role: string) {
    const user = await signup(`as-${role}`);
    expect((await call('POST', '/admin/v1/members', owner.auth, { email: user.email, role })).status).toBe(
      201,
    );
    const switched = await call('POST', '/admin/v1/auth/session/tenant', user.auth, { tenant_id: tenantId });
    expect(switched.status).toBe(200);
    return user.auth;
  }

  /** The valid body the shared route list gives this route (schema validation runs before any lookup). */
  const bodyOf = (route: ServedRoute) => {
    const pattern = new RegExp(`^${route.url.replace(/:[A-Za-z_]+/g, '[^/]+')}$`);
    return ROUTES.find((r) => r.method === route.method && pattern.test(r.url.replace(/\?.*$/, '')))?.body;
  };
  const concrete = (url: string, params: Record<string, string>) =>
    url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => params[name] ?? 'xxx_00000000000000000000');

  type Acting = { auth: Record<string, string> } & Subject;

  /** Tenant A's machine principals: its developer bot, and an identity token with every project scope. */
  const machinesOfA = (): Record<string, Acting> => ({
    bot: { auth: a.botToken, kind: PrincipalKind.BOT, role: 'developer' },
    identity: {
      auth: a.identityToken,
      kind: PrincipalKind.IDENTITY,
      role: 'developer',
      scopes: [...PROJECT_PERMISSIONS],
    },
  });

  /** Whether IAM lets `p` through to the lookup on `route` (contract rule 2: bots never create identity tokens). */
  const passesIam = (p: Acting, route: ServedRoute & { permission: Permission }) =>
    can(p, route.permission) && !(p.kind === PrincipalKind.BOT && key(route) === IDENTITY_TOKEN_CREATION);

  let a: Awaited<ReturnType<typeof populate>>;
  let b: Awaited<ReturnType<typeof populate>>;

  beforeAll(async () => {
    stack = await startStack('gw_iam');
    a = await populate('tenant-a');
    b = await populate('tenant-b');
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  it('every /admin/v1 and /v1/projects route checks a permission or is a listed exception', () => {
    const unguarded = stack.routes
      .filter((r) => r.documented && (r.url.startsWith('/admin/v1/') || r.url.startsWith('/v1/projects/')))
      .filter((r) => !r.permission)
      .map(key);
    expect(unguarded.sort()).toEqual(
      Object.keys(NO_TENANT_PERMISSION)
        .filter((k) => unguarded.includes(k))
        .sort(),
    );
    expect(unguarded.filter((k) => !(k in NO_TENANT_PERMISSION))).toEqual([]);
    expect(guarded().length).toBeGreaterThanOrEqual(24);
    // Every permission of the matrix guards at least one route.
    expect(new Set(guarded().map((r) => r.permission))).toEqual(new Set(PERMISSIONS));
  });

  it("docs/iam.md's route table is exactly the served routes and their permissions", () => {
    const served = new Map(
      guarded().map((r) => [`${r.method} ${openApiPath(r.url)}`, r.permission as string]),
    );
    expect(Object.fromEntries(documentedRoutes())).toEqual(Object.fromEntries(served));
  });

  it('every guarded route answers 403 naming the permission to a viewer who lacks it', async () => {
    const viewer = await memberWithRole(a.owner, a.owner.tenantId, 'viewer');
    const answers: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};
    for (const route of guarded().filter((r) => !r.permission.endsWith(':read'))) {
      const res = await call(route.method, concrete(route.url, a.params), viewer, bodyOf(route));
      answers[key(route)] = res;
      expected[key(route)] = {
        status: 403,
        body: {
          error: deniedMessage({ kind: PrincipalKind.USER_SESSION, role: 'viewer' }, route.permission),
        },
      };
    }
    expect(answers).toEqual(expected);
  });

  it('every guarded route answers 403 to an identity token without that one scope', async () => {
    for (const route of guarded()) {
      const scopes = [...PROJECT_PERMISSIONS].filter(
        (p) => p !== route.permission && p !== 'identity_tokens:write',
      );
      // The token is created by the owner for tenant A's developer bot, with every project scope but this one.
      const created = await call(
        'POST',
        `/v1/projects/${a.params.project_id}/identities/${a.params.bot_id}/tokens`,
        a.owner.auth,
        { scopes: scopes.length > 0 ? scopes : ['projects:read'] },
      );
      expect(created.status, key(route)).toBe(201);
      const res = await call(
        route.method,
        concrete(route.url, a.params),
        { authorization: `Bearer ${created.body.value}` },
        bodyOf(route),
      );
      expect(res, key(route)).toEqual({
        status: 403,
        body: {
          error: deniedMessage({ kind: PrincipalKind.IDENTITY, role: 'developer', scopes }, route.permission),
        },
      });
    }
  });

  it("tenant A's principals get 404 for tenant B's ids on every route that names one (403 where they lack the permission)", async () => {
    const principals: Record<string, Acting> = {
      owner: { auth: a.owner.auth, kind: PrincipalKind.USER_SESSION, role: 'owner' },
      viewer: {
        auth: await memberWithRole(a.owner, a.owner.tenantId, 'viewer'),
        kind: PrincipalKind.USER_SESSION,
        role: 'viewer',
      },
      ...machinesOfA(),
    };
    const routes = guarded().filter((r) => r.url.includes('/:'));
    expect(routes.length).toBeGreaterThanOrEqual(15);
    const answers: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};
    for (const [name, p] of Object.entries(principals)) {
      for (const route of routes) {
        const res = await call(route.method, concrete(route.url, b.params), p.auth, bodyOf(route));
        answers[`${name} ${key(route)}`] = { status: res.status, keys: Object.keys(res.body) };
        const allowed = passesIam(p, route);
        expected[`${name} ${key(route)}`] = { status: allowed ? 404 : 403, keys: ['error'] };
      }
    }
    expect(answers).toEqual(expected);
  });

  it("another tenant's ids answer exactly what ids that exist nowhere answer", async () => {
    const prefixes: Record<string, string> = {
      project_id: 'prj',
      key_id: 'key',
      entry_id: 'alw',
      bot_id: 'bot',
      identity_id: 'bot',
      token_id: 'idt',
      user_id: 'usr',
      jti: 'crd',
    };
    const nowhere = Object.fromEntries(
      Object.entries(prefixes).map(([k, p]) => [k, `${p}_00000000000000000000`]),
    );
    const answers: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};
    for (const route of guarded().filter((r) => r.url.includes('/:'))) {
      answers[key(route)] = await call(
        route.method,
        concrete(route.url, b.params),
        a.owner.auth,
        bodyOf(route),
      );
      expected[key(route)] = await call(
        route.method,
        concrete(route.url, nowhere),
        a.owner.auth,
        bodyOf(route),
      );
    }
    expect(answers).toEqual(expected);
    expect(Object.values(answers).every((r) => (r as { status: number }).status === 404)).toBe(true);
  });

  it("a bot or identity token of tenant A cannot reach A's other project either: 404 like a missing one", async () => {
    const second = await call('POST', '/admin/v1/projects', a.owner.auth, { name: 'second' });
    expect(second.status).toBe(201);
    const elsewhere = { ...a.params, project_id: second.body.id as string };
    const machines = machinesOfA();
    const routes = guarded().filter((r) => r.url.includes('/:project_id'));
    expect(routes.length).toBeGreaterThanOrEqual(10);
    const answers: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};
    for (const [name, p] of Object.entries(machines)) {
      for (const route of routes) {
        const res = await call(route.method, concrete(route.url, elsewhere), p.auth, bodyOf(route));
        answers[`${name} ${key(route)}`] = res.status;
        expected[`${name} ${key(route)}`] = passesIam(p, route) ? 404 : 403;
        if (res.status === 404)
          expect(res.body, `${name} ${key(route)}`).toEqual({ error: 'project not found' });
      }
    }
    expect(answers).toEqual(expected);
    // Its own project stays reachable.
    const own = await call('GET', `/admin/v1/projects/${a.params.project_id}/api-keys`, a.botToken);
    expect(own.status).toBe(200);
  });

  it("lists of tenant A never show tenant B's resources, and B's data is unchanged", async () => {
    const projects = await call('GET', '/admin/v1/projects', a.owner.auth);
    const listed = (projects.body.projects as { id: string }[]).map((p) => p.id);
    expect(listed).toContain(a.params.project_id);
    expect(listed).not.toContain(b.params.project_id);
    const members = await call('GET', '/admin/v1/members', a.owner.auth);
    expect((members.body.members as { user: { id: string } }[]).map((m) => m.user.id)).not.toContain(
      b.owner.userId,
    );
    // Everything B owns is still there after A's attempts.
    const keys = await call('GET', `/admin/v1/projects/${b.params.project_id}/api-keys`, b.owner.auth);
    expect(
      (keys.body.api_keys as { id: string; revoked_at: string | null }[]).map((k) => [k.id, k.revoked_at]),
    ).toEqual([[b.params.key_id, null]]);
    const tokens = await call(
      'GET',
      `/v1/projects/${b.params.project_id}/identities/${b.params.bot_id}/tokens`,
      b.owner.auth,
    );
    expect((tokens.body.identity_tokens as { revoked_at: string | null }[]).map((t) => t.revoked_at)).toEqual(
      [null],
    );
    const entries = await call('GET', `/admin/v1/projects/${b.params.project_id}/allowlist`, b.owner.auth);
    expect((entries.body.entries as { id: string }[]).map((e) => e.id)).toEqual([b.params.entry_id]);
  });
});
