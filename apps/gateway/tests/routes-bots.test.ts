import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

/** Bots and bot keys: management by users, bot tokens that authenticate, the free plan's bot limit. */
describe('gateway routes: bots', () => {
  let stack: Stack;
  let auth: { authorization: string };
  let projectId: string;

  beforeAll(async () => {
    stack = await startStack('gw_bots');
    const owner = await tenant(stack, { email: 'bots@example.test', name: 'Bots Co' });
    auth = owner.auth;
    projectId = await owner.project('a');
  });
  afterAll(async () => {
    await stack?.close();
  });

  const bots = () => `/admin/v1/projects/${projectId}/bots`;
  const keys = (botId: string) => `${bots()}/${botId}/keys`;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const createBot = (payload: { name: string; role?: string }) =>
    stack.app.inject({ method: 'POST', url: bots(), headers: auth, payload });

  let botId = '';
  let keyId = '';
  let token = '';

  it('creates a bot (201), developer by default, and lists it', async () => {
    const res = await createBot({ name: 'deployer' });
    expect(res.statusCode).toBe(201);
    const bot = res.json();
    expect(bot).toEqual({
      id: expect.stringMatching(/^bot_[0-9a-z]{20}$/),
      project_id: projectId,
      name: 'deployer',
      role: 'developer',
      created_at: expect.any(String),
    });
    botId = bot.id;
    const list = await stack.app.inject({ method: 'GET', url: bots(), headers: auth });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual({ bots: [bot], next_cursor: null });
  });

  it('creates a key (201) answering the bot token once; lists never show it', async () => {
    const res = await stack.app.inject({ method: 'POST', url: keys(botId), headers: auth });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.token).toMatch(/^rpb_[0-9a-f]{72}$/);
    expect(body.bot_key).toEqual({
      id: expect.stringMatching(/^key_[0-9a-z]{20}$/),
      bot_id: botId,
      display_prefix: body.token.slice(0, 8),
      last_four: body.token.slice(-4),
      created_at: expect.any(String),
      last_used_at: null,
      revoked_at: null,
    });
    token = body.token;
    keyId = body.bot_key.id;

    const list = await stack.app.inject({ method: 'GET', url: keys(botId), headers: auth });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual({ bot_keys: [body.bot_key], next_cursor: null });
    expect(list.body).not.toContain(token.slice(8, -4));
  });

  it('a bot token authenticates: /admin/v1/auth/session describes the bot', async () => {
    const res = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: bearer(token),
    });
    expect(res.statusCode).toBe(200);
    const me = await stack.app.inject({ method: 'GET', url: '/admin/v1/auth/session', headers: auth });
    expect(res.json()).toEqual({
      authenticated_by: 'bot_token',
      tenant_id: me.json().tenant.id,
      project_id: projectId,
      role: 'developer',
      permissions: [
        'projects:read',
        'api_keys:read',
        'api_keys:write',
        'allowlist:read',
        'allowlist:write',
        'bots:read',
        'identity_tokens:read',
        'identity_tokens:write',
      ],
      bot: {
        id: botId,
        project_id: projectId,
        name: 'deployer',
        role: 'developer',
        created_at: expect.any(String),
      },
    });
    // The user session still answers the user's session.
    expect(me.json()).toMatchObject({ authenticated_by: 'bearer', role: 'owner' });
    const used = await stack.app.inject({ method: 'GET', url: keys(botId), headers: auth });
    expect(used.json().bot_keys[0].last_used_at).toEqual(expect.any(String));
  });

  it('a bot token acts within its project with its role: reads, but no bot, project or member management (403)', async () => {
    const machineOnly = (p: string) =>
      `permission ${p} is not available to bots or identity tokens; use a user session`;
    const refused = [
      { method: 'POST' as const, url: bots(), payload: { name: 'sneaky' }, error: machineOnly('bots:write') },
      { method: 'POST' as const, url: keys(botId), error: machineOnly('bots:write') },
      { method: 'DELETE' as const, url: `${keys(botId)}/${keyId}`, error: machineOnly('bots:write') },
      {
        method: 'POST' as const,
        url: '/admin/v1/projects',
        payload: { name: 'x' },
        error: machineOnly('projects:write'),
      },
      { method: 'GET' as const, url: '/admin/v1/members', error: machineOnly('members:read') },
      {
        method: 'POST' as const,
        url: '/admin/v1/auth/logout',
        error: 'this operation needs a user session; bot tokens and identity tokens are not accepted',
      },
    ];
    for (const { error, ...attempt } of refused) {
      const res = await stack.app.inject({ ...attempt, headers: bearer(token) });
      expect(res.statusCode, `${attempt.method} ${attempt.url}`).toBe(403);
      expect(res.json(), `${attempt.method} ${attempt.url}`).toEqual({ error });
    }
    const list = await stack.app.inject({ method: 'GET', url: bots(), headers: bearer(token) });
    expect(list.statusCode).toBe(200);
    expect(list.json().bots.map((b: { id: string }) => b.id)).toContain(botId);
    const projects = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/projects',
      headers: bearer(token),
    });
    expect(projects.statusCode).toBe(200);
    expect(projects.json().projects.map((p: { id: string }) => p.id)).toEqual([projectId]);
  });

  it("another tenant's project, bot or key answers 404", async () => {
    const other = await stack.ownerAuth();
    for (const [method, url] of [
      ['GET', bots()],
      ['POST', keys(botId)],
      ['GET', keys(botId)],
      ['DELETE', `${keys(botId)}/${keyId}`],
    ] as const) {
      const res = await stack.app.inject({ method, url, headers: other });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
    }
    const unknownBot = await stack.app.inject({
      method: 'POST',
      url: keys('bot_00000000000000000000'),
      headers: auth,
    });
    expect(unknownBot.statusCode).toBe(404);
    expect(unknownBot.json()).toEqual({ error: 'bot not found' });
  });

  it('revokes a key (idempotent); the revoked token answers 401', async () => {
    const url = `${keys(botId)}/${keyId}`;
    const first = await stack.app.inject({ method: 'DELETE', url, headers: auth });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ id: keyId, revoked_at: expect.any(String) });
    const again = await stack.app.inject({ method: 'DELETE', url, headers: auth });
    expect(again.statusCode).toBe(200);
    expect(again.json().revoked_at).toBe(first.json().revoked_at);

    const res = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: bearer(token),
    });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'invalid or expired token' });
  });

  it("answers 422 with the free plan's bot limit once it is used up", async () => {
    // The free plan allows 2 bots per tenant (built-in defaults); one exists already.
    const second = await createBot({ name: 'reader', role: 'viewer' });
    expect(second.statusCode).toBe(201);
    expect(second.json().role).toBe('viewer');
    const over = await createBot({ name: 'third' });
    expect(over.statusCode).toBe(422);
    expect(over.json().error).toMatch(/free plan .*max_bots/);
    const list = await stack.app.inject({ method: 'GET', url: bots(), headers: auth });
    expect(list.json().bots.map((b: { name: string }) => b.name)).toEqual(['deployer', 'reader']);
  });

  it('refuses an owner or admin role for a bot (400)', async () => {
    const res = await createBot({ name: 'boss', role: 'owner' });
    expect(res.statusCode).toBe(400);
  });
});
