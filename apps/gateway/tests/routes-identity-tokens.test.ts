import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** POST/GET/DELETE /v1/projects/{project_id}/identities/{identity_id}/tokens through the gateway. */
describe('gateway routes: identity tokens', () => {
  let stack: Stack;
  let owner: { authorization: string };
  let projectId: string;
  let botId: string;
  let viewerBotId: string;
  const tokens = (identity = botId) => `/v1/projects/${projectId}/identities/${identity}/tokens`;

  beforeAll(async () => {
    stack = await startStack('gw_identity');
    const idt = await tenant(stack, { email: 'idt@example.test', name: 'Idt' });
    owner = idt.auth;
    projectId = await idt.project('p');
    const bot = (name: string, role: string) =>
      stack.app.inject({
        method: 'POST',
        url: `/admin/v1/projects/${projectId}/bots`,
        headers: owner,
        payload: { name, role },
      });
    botId = (await bot('ci', 'developer')).json().id;
    viewerBotId = (await bot('ro', 'viewer')).json().id;
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('creates a token (201) with exactly the contract fields; the value works as a bearer and is never listed', async () => {
    const before = Date.now();
    const res = await stack.app.inject({
      method: 'POST',
      url: tokens(),
      headers: owner,
      payload: { scopes: ['projects:read', 'api_keys:read'] },
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['created_at', 'expires_at', 'id', 'scopes', 'value']);
    expect(body.value).toMatch(/^rpi_[0-9a-f]{72}$/);
    expect(body.scopes).toEqual(['projects:read', 'api_keys:read']);
    const ttl = Date.parse(body.expires_at) - before;
    expect(ttl).toBeGreaterThan(3_590_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000 + 1000);

    const me = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: bearer(body.value),
    });
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({
      authenticated_by: 'identity_token',
      project_id: projectId,
      role: 'developer',
      permissions: ['projects:read', 'api_keys:read'],
      bot: { id: botId },
      identity_token: { id: body.id, scopes: ['projects:read', 'api_keys:read'], revoked_at: null },
    });
    const keys = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: bearer(body.value),
    });
    expect(keys.statusCode).toBe(200);
    const write = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: bearer(body.value),
      payload: {},
    });
    expect(write.statusCode).toBe(403);
    expect(write.json()).toEqual({
      error: "the identity token's scopes do not grant permission api_keys:write",
    });

    const list = await stack.app.inject({ method: 'GET', url: tokens(), headers: owner });
    expect(list.statusCode).toBe(200);
    expect(list.json().identity_tokens[0]).toMatchObject({
      id: body.id,
      display_prefix: body.value.slice(0, 8),
    });
    expect(list.body).not.toContain(body.value.slice(8, 60));
  });

  it('answers 403 to an API key and to a bot token, 401 to an unknown prefix', async () => {
    const key = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: owner,
      payload: {},
    });
    const byKey = await stack.app.inject({
      method: 'POST',
      url: tokens(),
      headers: { 'x-api-key': key.json().key },
      payload: { scopes: ['projects:read'] },
    });
    expect(byKey.statusCode).toBe(403);
    expect(byKey.json()).toEqual({
      error: 'API keys authenticate credential issuance only; this operation needs a bearer token',
    });
    const botKey = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots/${botId}/keys`,
      headers: owner,
    });
    const byBot = await stack.app.inject({
      method: 'POST',
      url: tokens(),
      headers: bearer(botKey.json().token),
      payload: { scopes: ['projects:read'] },
    });
    expect(byBot.statusCode).toBe(403);
    expect(byBot.json()).toEqual({
      error:
        'identity tokens can be created with a user session or an identity token only; bot tokens are not accepted',
    });
    const unknown = await stack.app.inject({
      method: 'POST',
      url: tokens(),
      headers: bearer(`rpz_${'0'.repeat(72)}`),
      payload: { scopes: ['projects:read'] },
    });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json()).toEqual({ error: 'invalid or expired token' });
  });

  it('answers 403 for scopes beyond the caller or the identity, 400 for bad scopes and expiries', async () => {
    const post = (payload: unknown, identity = botId, headers = owner) =>
      stack.app.inject({ method: 'POST', url: tokens(identity), headers, payload: payload as object });
    const cases: [unknown, string, number, string][] = [
      [
        { scopes: ['api_keys:write'] },
        viewerBotId,
        403,
        "the identity's role (viewer) does not grant scope api_keys:write",
      ],
      [
        { scopes: ['billing:read'] },
        botId,
        403,
        'scope billing:read is not available to identities (it needs a user session)',
      ],
      [{ scopes: ['relay:session'] }, botId, 400, ''],
      [{ scopes: [] }, botId, 400, ''],
      [{}, botId, 400, ''],
      [{ scopes: ['projects:read'], expires_at: 'tomorrow' }, botId, 400, ''],
      [
        { scopes: ['projects:read'], expires_at: new Date(Date.now() + 31 * 86_400_000).toISOString() },
        botId,
        400,
        'expires_at must be at most 30 days in the future',
      ],
      [
        { scopes: ['projects:read'], expires_at: new Date(Date.now() - 1000).toISOString() },
        botId,
        400,
        'expires_at must be at least 60 seconds in the future',
      ],
      [{ scopes: ['projects:read'], extra: 1 }, botId, 400, ''],
    ];
    for (const [payload, identity, status, error] of cases) {
      const res = await post(payload, identity);
      expect(res.statusCode, JSON.stringify(payload)).toBe(status);
      expect(Object.keys(res.json())).toEqual(['error']);
      if (error) expect(res.json().error).toBe(error);
    }
    // A narrow identity token cannot lend more than it holds.
    const narrow = await post({ scopes: ['identity_tokens:write', 'projects:read'] });
    const wider = await post({ scopes: ['api_keys:read'] }, botId, bearer(narrow.json().value));
    expect(wider.statusCode).toBe(403);
    expect(wider.json()).toEqual({ error: 'the caller does not hold scope api_keys:read' });
    const same = await post({ scopes: ['projects:read'] }, viewerBotId, bearer(narrow.json().value));
    expect(same.statusCode).toBe(201);
  });

  it('revokes idempotently (200); the revoked token answers 401', async () => {
    const created = await stack.app.inject({
      method: 'POST',
      url: tokens(),
      headers: owner,
      payload: { scopes: ['projects:read'] },
    });
    const url = `${tokens()}/${created.json().id}`;
    const first = await stack.app.inject({ method: 'DELETE', url, headers: owner });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ id: created.json().id, revoked_at: expect.any(String) });
    const again = await stack.app.inject({ method: 'DELETE', url, headers: owner });
    expect(again.json().revoked_at).toBe(first.json().revoked_at);
    const me = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/session',
      headers: bearer(created.json().value),
    });
    expect(me.statusCode).toBe(401);
    expect(me.json()).toEqual({ error: 'invalid or expired token' });
    const missing = await stack.app.inject({
      method: 'DELETE',
      url: `${tokens()}/idt_00000000000000000000`,
      headers: owner,
    });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ error: 'identity token not found' });
  });
});
