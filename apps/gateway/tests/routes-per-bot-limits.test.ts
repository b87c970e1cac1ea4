import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

/**
 * Per-bot limits (docs/iam.md, "Limits"), through HTTP with the defaults: a bot has at most 10
 * active keys and an identity at most 100 active identity tokens; one more answers 422
 * `{"error"}` naming the setting, and revoking one frees a place.
 */
describe('gateway routes: per-bot limits on keys and identity tokens', () => {
  let stack: Stack;
  let owner: Tenant;
  let projectId = '';

  beforeAll(async () => {
    stack = await startStack('gw_perbot');
    owner = await tenant(stack, { email: 'perbot@example.test', name: 'Per Bot' });
    projectId = await owner.project('main');
  });
  afterAll(async () => {
    await stack?.close();
  });

  async function newBot(name: string): Promise<string> {
    const res = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots`,
      headers: owner.auth,
      payload: { name },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json<{ id: string }>().id;
  }

  const send = (method: 'POST' | 'DELETE', url: string, payload?: object) =>
    stack.app.inject({ method, url, headers: owner.auth, ...(payload ? { payload } : {}) });

  it('the 11th active key of a bot is 422 {"error"}; after a revocation one more is 201', async () => {
    const botId = await newBot('keys');
    const keys = `/admin/v1/projects/${projectId}/bots/${botId}/keys`;
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await send('POST', keys);
      expect(res.statusCode, res.body).toBe(201);
      ids.push(res.json<{ bot_key: { id: string } }>().bot_key.id);
    }
    const refused = await send('POST', keys);
    expect(refused.statusCode).toBe(422);
    expect(refused.json()).toEqual({ error: expect.stringContaining('ADMIN_MAX_ACTIVE_KEYS_PER_BOT') });
    expect(refused.json<{ error: string }>().error).toContain('10 active keys');
    // The refusal answered no token.
    expect(refused.body).not.toContain('rpb_');

    const revoked = await send('DELETE', `${keys}/${ids[0]}`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect((await send('POST', keys)).statusCode).toBe(201);
    expect((await send('POST', keys)).statusCode).toBe(422);
  });

  it('the 101st active identity token of an identity is 422 {"error"}; after a revocation one more is 201', async () => {
    const botId = await newBot('identity');
    const tokens = `/v1/projects/${projectId}/identities/${botId}/tokens`;
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await send('POST', tokens, { scopes: ['projects:read'] });
      expect(res.statusCode, res.body).toBe(201);
      ids.push(res.json<{ id: string }>().id);
    }
    const refused = await send('POST', tokens, { scopes: ['projects:read'] });
    expect(refused.statusCode).toBe(422);
    expect(refused.json()).toEqual({
      error: expect.stringContaining('ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT'),
    });
    expect(refused.body).not.toContain('rpi_');

    const revoked = await send('DELETE', `${tokens}/${ids[42]}`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect((await send('POST', tokens, { scopes: ['projects:read'] })).statusCode).toBe(201);
    expect((await send('POST', tokens, { scopes: ['projects:read'] })).statusCode).toBe(422);
  });
});
