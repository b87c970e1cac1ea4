import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

type Headers = Record<string, string>;

/**
 * The reads the web console starts from, on the real services (PostgreSQL, Redis): the caller's
 * tenants (`GET /admin/v1/auth/tenants`), every tenant for an operator (`GET /admin/v1/tenants`),
 * one project (`GET /admin/v1/projects/{id}`), and the active tenant's connections against its
 * cap (`GET /admin/v1/tenant/connections`).
 */
describe('gateway routes: console reads (my tenants, all tenants, a project, connections)', () => {
  let stack: Stack;
  let seq = 0;

  beforeAll(async () => {
    stack = await startStack('gw_console_api');
  });
  afterAll(async () => {
    await stack?.close();
  });

  const signup = (name: string) => tenant(stack, { email: `console-${++seq}@example.test`, name });
  const call = (method: 'GET' | 'POST' | 'PUT', url: string, headers: Headers, payload?: object) =>
    stack.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  const get = async (url: string, headers: Headers) => {
    const res = await call('GET', url, headers);
    return { status: res.statusCode, body: res.json() };
  };
  const myTenants = async (headers: Headers) => {
    const res = await get('/admin/v1/auth/tenants', headers);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (
      res.body.tenants as { tenant: { id: string; name: string }; role: string; active: boolean }[]
    ).map((t) => [t.tenant.name, t.role, t.active]);
  };

  /** A bot token of a project of `owner`'s tenant. */
  async function botToken(owner: Tenant): Promise<Headers> {
    const projectId = await owner.project('bots');
    const bot = await call('POST', `/admin/v1/projects/${projectId}/bots`, owner.auth, { name: 'deployer' });
    expect(bot.statusCode, bot.body).toBe(201);
    const key = await call('POST', `/admin/v1/projects/${projectId}/bots/${bot.json().id}/keys`, owner.auth);
    expect(key.statusCode, key.body).toBe(201);
    return { authorization: `Bearer ${key.json().token}` };
  }

  /** A CLI token (`rpc_…`) of `user`, through the device flow approved by their session. */
  async function cliToken(user: Tenant): Promise<Headers> {
    const started = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/device/code',
      payload: { client_id: 'relayplane-cli' },
    });
    expect(started.statusCode, started.body).toBe(200);
    const { device_code, user_code } = started.json<{ device_code: string; user_code: string }>();
    const approved = await call('POST', '/admin/v1/auth/device/approve', user.auth, {
      user_code,
      action: 'approve',
    });
    expect(approved.statusCode, approved.body).toBe(200);
    const token = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/token',
      payload: {
        grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
        device_code,
        client_id: 'relayplane-cli',
      },
    });
    expect(token.statusCode, token.body).toBe(200);
    return { authorization: `Bearer ${token.json().access_token}` };
  }

  describe('GET /admin/v1/auth/tenants (listMyTenants)', () => {
    it("lists the user's two tenants by name with the role in each; switching the session flips `active`", async () => {
      const a = await signup('Alpha works');
      const b = await signup('Zulu works');
      const added = await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'developer' });
      expect(added.statusCode, added.body).toBe(201);

      const listed = await get('/admin/v1/auth/tenants', b.auth);
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual({
        tenants: [
          {
            tenant: { id: a.tenantId, name: 'Alpha works', created_at: expect.any(String) },
            role: 'developer',
            active: false,
          },
          {
            tenant: { id: b.tenantId, name: 'Zulu works', created_at: expect.any(String) },
            role: 'owner',
            active: true,
          },
        ],
      });

      const switched = await call('POST', '/admin/v1/auth/session/tenant', b.auth, { tenant_id: a.tenantId });
      expect(switched.statusCode, switched.body).toBe(200);
      expect(await myTenants(b.auth)).toEqual([
        ['Alpha works', 'developer', true],
        ['Zulu works', 'owner', false],
      ]);
      // The owner of Alpha sees Alpha only.
      expect(await myTenants(a.auth)).toEqual([['Alpha works', 'owner', true]]);
    });

    it('answers any user session: the session cookie, and a CLI token (active: the tenant it was approved in)', async () => {
      const user = await signup('Cookie co');
      const login = await call(
        'POST',
        '/admin/v1/auth/login',
        {},
        { email: user.email, password: 'a long enough password' },
      );
      expect(login.statusCode, login.body).toBe(200);
      const cookie = login.cookies.find((c) => c.name === 'rp_session');
      expect(cookie).toBeDefined();
      expect(await myTenants({ cookie: `rp_session=${cookie?.value}` })).toEqual([
        ['Cookie co', 'owner', true],
      ]);
      expect(await myTenants(await cliToken(user))).toEqual([['Cookie co', 'owner', true]]);
    });

    it('answers 403 to a bot token and 401 without a session', async () => {
      const owner = await signup('Bot co');
      const refused = await get('/admin/v1/auth/tenants', await botToken(owner));
      expect(refused).toEqual({
        status: 403,
        body: {
          error: 'this operation needs a user session; bot tokens and identity tokens are not accepted',
        },
      });
      expect(await get('/admin/v1/auth/tenants', {})).toEqual({
        status: 401,
        body: { error: 'missing bearer token: send "Authorization: Bearer <token>"' },
      });
    });
  });

  describe('GET /admin/v1/tenants (listTenants)', () => {
    type Row = { id: string; name: string; created_at: string; plan_id: string; member_count: number };

    /** Every tenant, following `next_cursor` with pages of `limit`; and how many pages that took. */
    async function walk(headers: Headers, limit: number): Promise<{ rows: Row[]; pages: number }> {
      const rows: Row[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const query: string = cursor === null ? `limit=${limit}` : `limit=${limit}&cursor=${cursor}`;
        const res = await get(`/admin/v1/tenants?${query}`, headers);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body.tenants.length).toBeLessThanOrEqual(limit);
        rows.push(...res.body.tenants);
        cursor = res.body.next_cursor;
        pages++;
      } while (cursor !== null);
      return { rows, pages };
    }

    it('pages every tenant for a platform admin, oldest first, with member counts and the plan billing has', async () => {
      const operator = await stack.ownerAuth();
      const made = [await signup('Page one'), await signup('Page two'), await signup('Page three')];
      const joined = await call('POST', '/admin/v1/members', made[0]?.auth ?? {}, {
        email: made[1]?.email,
        role: 'viewer',
      });
      expect(joined.statusCode, joined.body).toBe(201);
      const plan = await call('PUT', `/admin/v1/tenants/${made[2]?.tenantId}/plan`, operator, {
        plan: 'pro',
      });
      expect(plan.statusCode, plan.body).toBe(200);

      const { rows, pages } = await walk(operator, 2);
      expect(pages).toBe(Math.ceil(rows.length / 2));
      // Each tenant once, oldest first (ties by id: admin's tenants.test.ts).
      expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
      expect(rows.map((r) => r.created_at)).toEqual(rows.map((r) => r.created_at).sort());
      // The bootstrap tenant (the stack's `acme`, on the plan the bootstrap put it on) first.
      const bootstrapPlan = (await get('/admin/v1/billing/subscription', operator)).body.plan.id;
      expect(bootstrapPlan).toBe('enterprise');
      expect(rows[0]).toMatchObject({ name: 'acme', plan_id: bootstrapPlan, member_count: 1 });
      const byId = new Map(rows.map((r) => [r.id, r]));
      expect(made.map((t) => byId.get(t.tenantId))).toEqual([
        {
          id: made[0]?.tenantId,
          name: 'Page one',
          created_at: expect.any(String),
          plan_id: 'free',
          member_count: 2,
        },
        {
          id: made[1]?.tenantId,
          name: 'Page two',
          created_at: expect.any(String),
          plan_id: 'free',
          member_count: 1,
        },
        {
          id: made[2]?.tenantId,
          name: 'Page three',
          created_at: expect.any(String),
          plan_id: 'pro',
          member_count: 1,
        },
      ]);
      // Without paging parameters: the first page (50), here all of them.
      const all = await get('/admin/v1/tenants', operator);
      expect(all.body).toEqual({ tenants: rows, next_cursor: null });
    });

    it('answers 403 {error} to anyone but a platform admin (a tenant owner, a bot), 400 to a bad limit or cursor', async () => {
      const owner = await signup('Not an operator');
      const forbidden = { status: 403, body: { error: 'this operation needs a platform administrator' } };
      expect(await get('/admin/v1/tenants', owner.auth)).toEqual(forbidden);
      expect((await get('/admin/v1/tenants', await botToken(owner))).status).toBe(403);
      const operator = await stack.ownerAuth();
      expect(await get('/admin/v1/tenants?limit=0', operator)).toEqual({
        status: 400,
        body: { error: 'limit must be between 1 and 200' },
      });
      expect(await get('/admin/v1/tenants?limit=201', operator)).toEqual({
        status: 400,
        body: { error: 'limit must be between 1 and 200' },
      });
      expect(await get('/admin/v1/tenants?cursor=bm90LWEtY3Vyc29y', operator)).toEqual({
        status: 400,
        body: { error: 'cursor is not a cursor this endpoint answered' },
      });
      const unknown = await get('/admin/v1/tenants?plan=pro', operator);
      expect(unknown.status).toBe(400);
      expect(Object.keys(unknown.body)).toEqual(['error']);
    });
  });

  describe('GET /admin/v1/projects/{project_id} (getProject)', () => {
    it("reads one project of the active tenant; another tenant's, a missing or a malformed id is 404; a bot reads only its own", async () => {
      const owner = await signup('Project reads');
      const id = await owner.project('video');
      const listed = await get('/admin/v1/projects', owner.auth);
      const project = (listed.body.projects as { id: string }[]).find((p) => p.id === id);
      expect(project).toBeDefined();
      const read = await get(`/admin/v1/projects/${id}`, owner.auth);
      expect(read).toEqual({ status: 200, body: project });
      expect(read.body).toMatchObject({ id, name: 'video' });

      const other = await signup('Someone else');
      const otherId = await other.project('theirs');
      const notFound = { status: 404, body: { error: 'project not found' } };
      expect(await get(`/admin/v1/projects/${otherId}`, owner.auth)).toEqual(notFound);
      expect(await get('/admin/v1/projects/prj_00000000000000000000', owner.auth)).toEqual(notFound);
      expect(await get('/admin/v1/projects/not-an-id', owner.auth)).toEqual(notFound);
      expect((await get(`/admin/v1/projects/${id}`, {})).status).toBe(401);

      // A bot (of another project of the same tenant) reads its own project, and no other.
      const bot = await botToken(owner);
      const own = (await get('/admin/v1/projects', bot)).body.projects as { id: string; name: string }[];
      expect(own.map((p) => p.name)).toEqual(['bots']);
      expect(await get(`/admin/v1/projects/${own[0]?.id}`, bot)).toMatchObject({
        status: 200,
        body: { name: 'bots' },
      });
      expect(await get(`/admin/v1/projects/${id}`, bot)).toEqual(notFound);
    });
  });

  describe('GET /admin/v1/tenant/connections (getTenantConnections)', () => {
    const relay = { id: '', token: '' };
    let sessionSeq = 0;

    beforeAll(async () => {
      const res = await call('POST', '/admin/v1/relays', await stack.ownerAuth(), {
        region: 'eu-west',
        host: 'relay-console.example',
        port: 4433,
      });
      expect(res.statusCode, res.body).toBe(201);
      Object.assign(relay, { id: res.json().relay.id, token: res.json().token });
      const beat = await call(
        'POST',
        '/v1/relays/heartbeat',
        { authorization: `Bearer ${relay.token}` },
        {
          load: 0.1,
        },
      );
      expect(beat.statusCode, beat.body).toBe(200);
    });

    /** A relay session event for `relay`, as moq-relay sends it. */
    const relayEvent = (body: Record<string, unknown>) =>
      call(
        'POST',
        '/v1/relays/auth',
        { authorization: `Bearer ${relay.token}` },
        {
          node: relay.id,
          transport: 'quic',
          path: '/demo/room',
          ...body,
        },
      );

    const connections = (headers: Headers) => get('/admin/v1/tenant/connections', headers);

    it('counts slots as credentials are issued, live sessions as relays connect, against the plan’s cap', async () => {
      const t = await signup('Connections co');
      const projectId = await t.project('live');
      const { key } = await t.apiKey(projectId);
      const plan = (await get('/admin/v1/billing/subscription', t.auth)).body.plan;
      expect(await connections(t.auth)).toEqual({
        status: 200,
        body: { live_sessions: 0, slots_held: 0, cap: plan.limits.max_concurrent_connections },
      });

      const issued: { token: string }[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await call('POST', '/api/v1/credentials', { 'x-api-key': key }, {});
        expect(res.statusCode, res.body).toBe(201);
        issued.push(res.json());
      }
      expect((await connections(t.auth)).body).toEqual({ live_sessions: 0, slots_held: 3, cap: 10 });

      // A connect: the credential's slot passes to its session (still 3 held), one live session.
      const id = (++sessionSeq).toString(16).padStart(32, '0');
      const connected = await relayEvent({ id, event: 'connect', query: `jwt=${issued[0]?.token}` });
      expect(connected.statusCode, connected.body).toBe(200);
      expect((await connections(t.auth)).body).toEqual({ live_sessions: 1, slots_held: 3, cap: 10 });

      // The session ends: no live session, its slot freed at once.
      const ended = await relayEvent({
        id,
        event: 'end',
        reason: 'disconnected',
        duration: 1.5,
        bytes: { sent: 1, received: 2 },
      });
      expect(ended.statusCode, ended.body).toBe(204);
      expect((await connections(t.auth)).body).toEqual({ live_sessions: 0, slots_held: 2, cap: 10 });

      // The cap follows the plan at once.
      const upgraded = await call('PUT', `/admin/v1/tenants/${t.tenantId}/plan`, await stack.ownerAuth(), {
        plan: 'pro',
      });
      expect(upgraded.statusCode, upgraded.body).toBe(200);
      const pro = (await get('/admin/v1/billing/subscription', t.auth)).body.plan;
      expect(pro.id).toBe('pro');
      expect((await connections(t.auth)).body).toEqual({
        live_sessions: 0,
        slots_held: 2,
        cap: pro.limits.max_concurrent_connections,
      });
      expect(pro.limits.max_concurrent_connections).not.toBe(10);
    });

    it("counts the active tenant's only: another tenant's credentials are not in it", async () => {
      const a = await signup('Counted co');
      const b = await signup('Other co');
      const projectId = await b.project('live');
      const { key } = await b.apiKey(projectId);
      expect((await call('POST', '/api/v1/credentials', { 'x-api-key': key }, {})).statusCode).toBe(201);
      expect((await connections(a.auth)).body).toMatchObject({ live_sessions: 0, slots_held: 0 });
      expect((await connections(b.auth)).body).toMatchObject({ live_sessions: 0, slots_held: 1 });
    });

    it('takes billing:read: every member role reads it, a bot token gets 403', async () => {
      const owner = await signup('Roles co');
      const viewer = await signup('Viewer home');
      const added = await call('POST', '/admin/v1/members', owner.auth, {
        email: viewer.email,
        role: 'viewer',
      });
      expect(added.statusCode, added.body).toBe(201);
      const switched = await call('POST', '/admin/v1/auth/session/tenant', viewer.auth, {
        tenant_id: owner.tenantId,
      });
      expect(switched.statusCode, switched.body).toBe(200);
      expect((await connections(viewer.auth)).status).toBe(200);
      expect(await connections(await botToken(owner))).toEqual({
        status: 403,
        body: {
          error: 'permission billing:read is not available to bots or identity tokens; use a user session',
        },
      });
    });
  });
});
