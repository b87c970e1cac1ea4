import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/src/errors.ts';
import { inProcessCli } from './support/cli.ts';
import { OWNER, type Stack, startStack } from './support/stack.ts';
import { PASSWORD, tenant } from './support/tenant.ts';

interface Event {
  id: string;
  occurred_at: string;
  tenant_id: string | null;
  actor: { type: string; id: string };
  action: string;
  target: { type: string; id: string };
  outcome: string;
  ip: string | null;
  user_agent: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
  seq: number;
  hash: string;
  prev_hash: string;
}

const UA = 'audit-test/1.0';

/** The audit trail through the gateway, on the real services (PostgreSQL, Redis). */
describe('gateway routes: audit events', () => {
  let stack: Stack;
  let seq = 0;

  beforeAll(async () => {
    stack = await startStack('gw_audit');
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** Raw SQL on admin's database (the gateway's tests have no SQL builder of their own). */
  let statements = 0;
  async function ddl(text: string) {
    const run = stack.admin.database.prepared;
    if (!run) throw new Error('PostgreSQL only');
    await run(`gw_audit_test_${++statements}`, text, []);
  }

  const signup = (label: string) =>
    tenant(stack, { email: `${label}-${++seq}@example.test`, name: `${label} co` });

  const call = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    headers: Record<string, string>,
    payload?: object,
  ) =>
    stack.app.inject({
      method,
      url,
      headers: { 'user-agent': UA, ...headers },
      ...(payload ? { payload } : {}),
    });

  async function events(auth: Record<string, string>, query = ''): Promise<Event[]> {
    const res = await call('GET', `/admin/v1/audit-events?limit=200${query}`, auth);
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ events: Event[] }>().events;
  }

  it('records each admin change once, with its actor, target, outcome, IP, user agent and request id', async () => {
    const a = await signup('actions');
    const b = await signup('actions-member');
    const made: { action: string; target: string; requestId: string }[] = [];
    const change = async (
      action: string,
      method: 'POST' | 'PATCH' | 'DELETE',
      url: string,
      payload: object | undefined,
      target: (body: Record<string, unknown>) => string,
      auth: Record<string, string> = a.auth,
    ) => {
      const res = await call(method, url, auth, payload);
      expect(res.statusCode, `${action}: ${res.body}`).toBeLessThan(300);
      const body = res.body === '' ? {} : (res.json() as Record<string, unknown>);
      made.push({ action, target: target(body), requestId: String(res.headers['x-request-id']) });
      return body;
    };
    const id = (b: Record<string, unknown>) => String(b.id);

    const project = await change('project.create', 'POST', '/admin/v1/projects', { name: 'web' }, id);
    const p = String(project.id);
    const key = await change(
      'api_key.create',
      'POST',
      `/admin/v1/projects/${p}/api-keys`,
      { name: 'ci' },
      (k) => String((k.api_key as { id: string }).id),
    );
    const keyId = String((key.api_key as { id: string }).id);
    await change(
      'api_key.revoke',
      'DELETE',
      `/admin/v1/projects/${p}/api-keys/${keyId}`,
      undefined,
      () => keyId,
    );
    const entry = await change(
      'allowlist.create',
      'POST',
      `/admin/v1/projects/${p}/allowlist`,
      { cidr: '10.0.0.0/8' },
      id,
    );
    await change(
      'allowlist.delete',
      'DELETE',
      `/admin/v1/projects/${p}/allowlist/${entry.id}`,
      undefined,
      () => String(entry.id),
    );
    const bot = await change('bot.create', 'POST', `/admin/v1/projects/${p}/bots`, { name: 'deployer' }, id);
    const botKey = await change(
      'bot_key.create',
      'POST',
      `/admin/v1/projects/${p}/bots/${bot.id}/keys`,
      {},
      (k) => String((k.bot_key as { id: string }).id),
    );
    const botKeyId = String((botKey.bot_key as { id: string }).id);
    await change(
      'bot_key.revoke',
      'DELETE',
      `/admin/v1/projects/${p}/bots/${bot.id}/keys/${botKeyId}`,
      undefined,
      () => botKeyId,
    );
    const token = await change(
      'identity_token.create',
      'POST',
      `/v1/projects/${p}/identities/${bot.id}/tokens`,
      { scopes: ['projects:read'] },
      id,
    );
    const tokenId = String(token.id);
    await change(
      'identity_token.revoke',
      'DELETE',
      `/v1/projects/${p}/identities/${bot.id}/tokens/${tokenId}`,
      undefined,
      () => tokenId,
    );
    await change(
      'member.add',
      'POST',
      '/admin/v1/members',
      { email: b.email, role: 'viewer' },
      () => b.userId,
    );
    await change(
      'member.role_change',
      'PATCH',
      `/admin/v1/members/${b.userId}`,
      { role: 'developer' },
      () => b.userId,
    );
    await change('member.remove', 'DELETE', `/admin/v1/members/${b.userId}`, undefined, () => b.userId);

    const listed = await events(a.auth);
    for (const m of made) {
      const matching = listed.filter((e) => e.action === m.action);
      expect(matching, m.action).toHaveLength(1);
      expect(matching[0], m.action).toEqual({
        id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
        occurred_at: expect.any(String),
        tenant_id: a.tenantId,
        actor: { type: 'user', id: a.userId },
        action: m.action,
        target: { type: expect.any(String), id: m.target },
        outcome: 'success',
        ip: '127.0.0.1',
        user_agent: UA,
        request_id: m.requestId,
        details: expect.any(Object),
        seq: expect.any(Number),
        hash: expect.stringMatching(/^[0-9a-f]{64}$/),
        prev_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
    }
    // Newest first, in the order the changes were made.
    const order = listed.map((e) => e.action).filter((x) => made.some((m) => m.action === x));
    expect(order).toEqual(made.map((m) => m.action).reverse());
    // The API key's value was answered once and appears in no event.
    expect(JSON.stringify(listed)).not.toContain(String(key.key));
    expect(JSON.stringify(listed)).not.toContain(String(botKey.token));
    expect(JSON.stringify(listed)).not.toContain(String(token.value));

    const verify = await call('GET', '/admin/v1/audit-events/verify', a.auth);
    expect(verify.statusCode).toBe(200);
    expect(verify.json()).toEqual({
      ok: true,
      events_checked: expect.any(Number),
      first_bad_id: null,
      first_bad_seq: null,
      checkpoint_seq: null,
      checkpoint_ok: true,
      anchor_ok: true,
    });
    // Each event names the one before it.
    const bySeq = [...listed].sort((x, y) => x.seq - y.seq);
    for (let i = 1; i < bySeq.length; i++) {
      if (bySeq[i]?.seq === (bySeq[i - 1]?.seq ?? 0) + 1)
        expect(bySeq[i]?.prev_hash).toBe(bySeq[i - 1]?.hash);
    }
    expect(verify.json().events_checked).toBeGreaterThanOrEqual(made.length + 1);
  });

  it('records logins (success, wrong password), logout, device approval and denial once each, with actor, target, outcome and the client IP', async () => {
    const a = await signup('origin');
    const ip = '198.51.100.23';
    const from = (method: 'POST', url: string, headers: Record<string, string>, payload?: object | string) =>
      stack.app.inject({
        method,
        url,
        remoteAddress: ip,
        headers: { 'user-agent': UA, ...headers },
        ...(payload !== undefined ? { payload } : {}),
      });
    const requestIdOf = (res: { headers: Record<string, unknown> }) => String(res.headers['x-request-id']);

    const login = await from('POST', '/admin/v1/auth/login', {}, { email: a.email, password: PASSWORD });
    expect(login.statusCode, login.body).toBe(200);
    const session = login.json<{ token: string; session: { id: string } }>();
    const auth = { authorization: `Bearer ${session.token}` };
    const wrong = await from(
      'POST',
      '/admin/v1/auth/login',
      {},
      { email: a.email, password: 'not the password!' },
    );
    expect(wrong.statusCode).toBe(401);

    const startFlow = async () => {
      const res = await from(
        'POST',
        '/admin/v1/auth/device/code',
        { 'content-type': 'application/x-www-form-urlencoded' },
        'client_id=relayplane-cli&scope=cli',
      );
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ user_code: string }>().user_code;
    };
    const approved = await from('POST', '/admin/v1/auth/device/approve', auth, {
      user_code: await startFlow(),
      action: 'approve',
    });
    expect(approved.json()).toEqual({ status: 'approved', client_id: 'relayplane-cli' });
    const denied = await from('POST', '/admin/v1/auth/device/approve', auth, {
      user_code: await startFlow(),
      action: 'deny',
    });
    expect(denied.json()).toEqual({ status: 'denied', client_id: 'relayplane-cli' });
    // This session ends here; the trail is read below with the tenant's first one (a.auth).
    const logout = await from('POST', '/admin/v1/auth/logout', auth);
    expect(logout.statusCode).toBe(204);

    const listed = await events(a.auth);
    const expected: [string, typeof login, Partial<Event>][] = [
      [
        'session.login',
        login,
        {
          actor: { type: 'user', id: a.userId },
          target: { type: 'session', id: session.session.id },
          outcome: 'success',
        },
      ],
      [
        'session.login_failed',
        wrong,
        {
          actor: { type: 'anonymous', id: '' },
          target: { type: 'user', id: a.userId },
          outcome: 'failure',
          details: { reason: 'wrong_password', email: a.email },
        },
      ],
      [
        'device.approve',
        approved,
        {
          actor: { type: 'user', id: a.userId },
          target: { type: 'device_client', id: 'relayplane-cli' },
          outcome: 'success',
        },
      ],
      [
        'device.deny',
        denied,
        {
          actor: { type: 'user', id: a.userId },
          target: { type: 'device_client', id: 'relayplane-cli' },
          outcome: 'success',
        },
      ],
      [
        'session.logout',
        logout,
        {
          actor: { type: 'user', id: a.userId },
          target: { type: 'session', id: session.session.id },
          outcome: 'success',
        },
      ],
    ];
    for (const [action, res, shape] of expected) {
      // Exactly one event of the action, made by that request, in the tenant's trail.
      const ofRequest = listed.filter((e) => e.request_id === requestIdOf(res));
      expect(
        ofRequest.map((e) => e.action),
        action,
      ).toEqual([action]);
      expect(ofRequest[0], action).toMatchObject({ ...shape, tenant_id: a.tenantId, ip, user_agent: UA });
      expect(
        listed.filter((e) => e.action === action),
        action,
      ).toHaveLength(
        // signup's own login (tenant()) is one more session.login, from the default address.
        action === 'session.login' ? 2 : 1,
      );
    }
    expect(listed.find((e) => e.action === 'session.login' && e.request_id !== requestIdOf(login))?.ip).toBe(
      '127.0.0.1',
    );
    expect(JSON.stringify(listed)).not.toContain(session.token);
  });

  it('records a switch of tenant in the tenant switched to, by the user who switched', async () => {
    const a = await signup('switch');
    const b = await signup('switch-member');
    expect(
      (await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'viewer' })).statusCode,
    ).toBe(201);
    const res = await call('POST', '/admin/v1/auth/session/tenant', b.auth, { tenant_id: a.tenantId });
    expect(res.statusCode).toBe(200);
    const switched = (await events(a.auth, '&action=session.switch_tenant'))[0];
    expect(switched).toMatchObject({
      actor: { type: 'user', id: b.userId },
      target: { type: 'session' },
      details: { from_tenant_id: b.tenantId },
    });
  });

  it('names a bot or an identity token as the actor when one made the change', async () => {
    const a = await signup('machine-actor');
    const p = await a.project('machines');
    const bot = (
      await call('POST', `/admin/v1/projects/${p}/bots`, a.auth, { name: 'ci', role: 'developer' })
    ).json();
    const botKey = (await call('POST', `/admin/v1/projects/${p}/bots/${bot.id}/keys`, a.auth, {})).json();
    const byBot = await call(
      'POST',
      `/admin/v1/projects/${p}/api-keys`,
      { authorization: `Bearer ${botKey.token}` },
      {
        name: 'from-bot',
      },
    );
    expect(byBot.statusCode, byBot.body).toBe(201);
    const identity = (
      await call('POST', `/v1/projects/${p}/identities/${bot.id}/tokens`, a.auth, {
        scopes: ['allowlist:write'],
      })
    ).json();
    const byIdentity = await call(
      'POST',
      `/admin/v1/projects/${p}/allowlist`,
      { authorization: `Bearer ${identity.value}` },
      { cidr: '192.0.2.0/24' },
    );
    expect(byIdentity.statusCode, byIdentity.body).toBe(201);

    const [keyEvent] = await events(a.auth, `&target_id=${byBot.json().api_key.id}`);
    expect(keyEvent).toMatchObject({ action: 'api_key.create', actor: { type: 'bot', id: bot.id } });
    const [entryEvent] = await events(a.auth, `&target_id=${byIdentity.json().id}`);
    expect(entryEvent).toMatchObject({
      action: 'allowlist.create',
      actor: { type: 'identity_token', id: identity.id },
    });
    expect((await events(a.auth, `&actor_id=${bot.id}`)).map((e) => e.action)).toEqual(['api_key.create']);
  });

  it('keeps tenants apart: another tenant sees none of the events and may not name the tenant', async () => {
    const a = await signup('iso-a');
    const b = await signup('iso-b');
    await a.project('hidden-name');
    const seen = await events(b.auth);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((e) => e.tenant_id === b.tenantId)).toBe(true);
    expect(JSON.stringify(seen)).not.toContain('hidden-name');

    const named = await call('GET', `/admin/v1/audit-events?tenant_id=${a.tenantId}`, b.auth);
    expect(named.statusCode).toBe(403);
    expect(named.json()).toEqual({ error: 'only platform admins may read another tenant’s audit events' });
    const verify = await call('GET', `/admin/v1/audit-events/verify?tenant_id=${a.tenantId}`, b.auth);
    expect(verify.statusCode).toBe(403);

    const operator = await events(await stack.ownerAuth(), `&tenant_id=${a.tenantId}`);
    expect(operator.map((e) => e.action)).toContain('project.create');
    expect(operator.every((e) => e.tenant_id === a.tenantId)).toBe(true);
  });

  it('pages with next_cursor and filters by action, actor, target and time', async () => {
    const a = await signup('pages');
    const ids = [await a.project('one'), await a.project('two')];
    const first = await call('GET', '/admin/v1/audit-events?limit=1&action=project.create', a.auth);
    expect(first.statusCode).toBe(200);
    const page1 = first.json<{ events: Event[]; next_cursor: string | null }>();
    expect(page1.events.map((e) => e.target.id)).toEqual([ids[1]]);
    expect(page1.next_cursor).toEqual(expect.any(String));
    const second = await call(
      'GET',
      `/admin/v1/audit-events?limit=1&action=project.create&cursor=${encodeURIComponent(page1.next_cursor ?? '')}`,
      a.auth,
    );
    expect(second.json()).toEqual({
      events: [expect.objectContaining({ target: { type: 'project', id: ids[0] } })],
      next_cursor: null,
    });

    expect((await events(a.auth, `&target_id=${ids[0]}`)).map((e) => e.action)).toEqual(['project.create']);
    expect((await events(a.auth, `&actor_id=${a.userId}&action=project.create`)).length).toBe(2);
    expect(await events(a.auth, '&actor_id=usr_00000000000000000000')).toEqual([]);
    const later = new Date(Date.now() + 60_000).toISOString();
    expect(await events(a.auth, `&since=${later}`)).toEqual([]);
    expect((await events(a.auth, `&until=${later}&action=project.create`)).length).toBe(2);
  });

  it.each([
    ['limit=0', 'limit must be between 1 and 200'],
    ['limit=201', 'limit must be between 1 and 200'],
    ['since=yesterday', 'since must be an RFC 3339 date-time, e.g. 2026-11-25T12:00:00Z'],
    ['until=2026-11-25', 'until must be an RFC 3339 date-time, e.g. 2026-11-25T12:00:00Z'],
    ['since=2026-11-26T00:00:00Z&until=2026-11-25T00:00:00Z', 'since must not be after until'],
    ['cursor=not-a-cursor', 'cursor is not a cursor this endpoint answered'],
  ])('answers 400 with {"error"} for %s', async (query, error) => {
    const a = await signup('bad-filter');
    const res = await call('GET', `/admin/v1/audit-events?${query}`, a.auth);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error });
  });

  it('answers 400 for an unknown query parameter', async () => {
    const a = await signup('unknown-param');
    const res = await call('GET', '/admin/v1/audit-events?colour=blue', a.auth);
    expect(res.statusCode).toBe(400);
    expect(Object.keys(res.json())).toEqual(['error']);
  });

  it('refuses developers, viewers and bots (audit:read is for owners and admins)', async () => {
    const a = await signup('perm');
    const b = await signup('perm-dev');
    expect(
      (await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'developer' })).statusCode,
    ).toBe(201);
    expect(
      (await call('POST', '/admin/v1/auth/session/tenant', b.auth, { tenant_id: a.tenantId })).statusCode,
    ).toBe(200);
    const dev = await call('GET', '/admin/v1/audit-events', b.auth);
    expect(dev.statusCode).toBe(403);
    expect(dev.json()).toEqual({ error: 'your role (developer) does not grant permission audit:read' });

    const p = await a.project('bots');
    const bot = (
      await call('POST', `/admin/v1/projects/${p}/bots`, a.auth, { name: 'reader', role: 'developer' })
    ).json();
    const key = (await call('POST', `/admin/v1/projects/${p}/bots/${bot.id}/keys`, a.auth, {})).json();
    const byBot = await call('GET', '/admin/v1/audit-events/verify', {
      authorization: `Bearer ${key.token}`,
    });
    expect(byBot.statusCode).toBe(403);
    expect(byBot.json()).toEqual({
      error: 'permission audit:read is not available to bots or identity tokens; use a user session',
    });

    await call('PATCH', `/admin/v1/members/${b.userId}`, a.auth, { role: 'admin' });
    expect((await call('GET', '/admin/v1/audit-events', b.auth)).statusCode).toBe(200);
  });

  it('reports an event edited in the database', async () => {
    const a = await signup('tamper');
    const projectId = await a.project('original');
    const db = stack.admin.database.db;
    await db
      .updateTable('audit_events')
      .set({ details: '{"name":"forged"}' })
      .where('target_id', '=', projectId)
      .execute();
    const row = await db
      .selectFrom('audit_events')
      .select('id')
      .where('target_id', '=', projectId)
      .executeTakeFirstOrThrow();
    const res = await call('GET', '/admin/v1/audit-events/verify', a.auth);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ok: false, events_checked: expect.any(Number), first_bad_id: row.id });
    expect(res.json().first_bad_seq).toBeGreaterThan(0);
  });

  it('answers 503 with Retry-After and changes nothing when the event cannot be written', async () => {
    const a = await signup('refuse');
    await ddl(
      `create or replace function gw_audit_refuse() returns trigger language plpgsql as $$
        begin raise exception 'refused by the test'; end $$`,
    );
    await ddl(
      'create trigger gw_audit_refuse before insert on admin.audit_events for each row execute function gw_audit_refuse()',
    );
    let res: Awaited<ReturnType<typeof call>>;
    try {
      res = await call('POST', '/admin/v1/projects', a.auth, { name: 'never' });
    } finally {
      await ddl('drop trigger gw_audit_refuse on admin.audit_events');
    }
    expect(res.statusCode).toBe(503);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.json()).toEqual({ error: 'the audit trail cannot record this change; retry shortly' });
    const list = await call('GET', '/admin/v1/projects', a.auth);
    expect(list.json().projects).toEqual([]);
  });

  it('records the bootstrap owner’s tenant as created by the system', async () => {
    const operator = await events(await stack.ownerAuth(), '&action=tenant.create');
    expect(operator).toHaveLength(1);
    expect(operator[0]).toMatchObject({
      actor: { type: 'system', id: 'bootstrap-owner' },
      details: { cause: 'bootstrap' },
    });
    expect(JSON.stringify(operator)).not.toContain(OWNER.password);
  });

  describe('relayplane audit (the CLI, in-process, against this gateway over HTTP)', () => {
    const cli = inProcessCli(() => stack.app, 'audit');

    it('audit list --json is the API page as is', async () => {
      const a = await signup('cli-list');
      const projectId = await a.project('cli');
      const json = await cli(['audit', 'list', '--action', 'project.create', '--json'], a.token);
      expect(json.code, json.stderr).toBe(EXIT.ok);
      const api = await call('GET', '/admin/v1/audit-events?action=project.create', a.auth);
      expect(JSON.parse(json.stdout)).toEqual(api.json());
      expect(JSON.parse(json.stdout).events[0].target).toEqual({ type: 'project', id: projectId });
    });

    it('audit verify exits 1 naming the first bad event once a row was edited', async () => {
      const a = await signup('cli-verify');
      const projectId = await a.project('cli');
      const intact = await cli(['audit', 'verify'], a.token);
      expect(intact.code, intact.stderr).toBe(EXIT.ok);
      expect(intact.stdout).toMatch(/^Intact:\s+yes$/m);
      const db = stack.admin.database.db;
      await db
        .updateTable('audit_events')
        .set({ details: '{"name":"forged"}' })
        .where('target_id', '=', projectId)
        .execute();
      const row = await db
        .selectFrom('audit_events')
        .select('id')
        .where('target_id', '=', projectId)
        .executeTakeFirstOrThrow();
      const broken = await cli(['audit', 'verify'], a.token);
      expect(broken.code).toBe(EXIT.api);
      expect(broken.stdout).toMatch(/^Intact:\s+NO$/m);
      expect(broken.stdout).toMatch(new RegExp(`^First bad event:\\s+${row.id}$`, 'm'));
      expect(broken.stderr).toBe(
        `relayplane: the audit trail is not intact: event ${row.id} does not hold\n`,
      );
      const json = await cli(['audit', 'verify', '--json'], a.token);
      expect(json.code).toBe(EXIT.api);
      expect(JSON.parse(json.stdout)).toMatchObject({
        ok: false,
        events_checked: expect.any(Number),
        first_bad_id: row.id,
      });
    });
  });
});
