import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

/** Per-project IP allowlists: CRUD, normalisation, limits, and enforcement on API-key requests. */
describe('gateway routes: IP allowlists', () => {
  let stack: Stack;
  let auth: { authorization: string };
  let projectId: string;
  let apiKey: string;

  beforeAll(async () => {
    // 127.0.0.1 is a trusted proxy here: its X-Forwarded-For is believed.
    stack = await startStack('gw_allow', { trustedProxies: ['127.0.0.1/32'] });
    const owner = await tenant(stack, { email: 'allow@example.test', name: 'Allow Co' });
    auth = owner.auth;
    projectId = await owner.project('a');
    apiKey = (await owner.apiKey(projectId)).key;
  });
  afterAll(async () => {
    await stack?.close();
  });

  const url = () => `/admin/v1/projects/${projectId}/allowlist`;
  const add = (cidr: string) =>
    stack.app.inject({ method: 'POST', url: url(), headers: auth, payload: { cidr } });
  const issue = (remoteAddress: string, forwardedFor?: string) =>
    stack.app.inject({
      method: 'POST',
      url: '/api/v1/credentials',
      remoteAddress,
      headers: { 'x-api-key': apiKey, ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
      payload: {},
    });
  /** Passes the API-key and allowlist checks but fails validation: 400 = allowed, 403 = refused (no slot used). */
  const probe = async (remoteAddress: string, forwardedFor?: string) =>
    (
      await stack.app.inject({
        method: 'POST',
        url: '/api/v1/credentials',
        remoteAddress,
        headers: { 'x-api-key': apiKey, ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
        payload: { ttl_seconds: 1 },
      })
    ).statusCode;
  /** The gateway caches key verification for ≤ 1 s: wait (bounded) for a change to show. */
  async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
    const deadline = Date.now() + 2_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('lets API keys work from anywhere while the allowlist is empty', async () => {
    expect((await issue('192.0.2.7')).statusCode).toBe(201);
  });

  it('normalises CIDRs, refuses duplicates (409) and invalid notation (422)', async () => {
    const v4 = await add('10.1.2.3/8');
    expect(v4.statusCode).toBe(201);
    expect(v4.json()).toMatchObject({ cidr: '10.0.0.0/8', project_id: projectId });
    const v6 = await add('2001:DB8:0:0::1/32');
    expect(v6.statusCode).toBe(201);
    expect(v6.json().cidr).toBe('2001:db8::/32');
    const dup = await add('10.200.0.0/8');
    expect(dup.statusCode).toBe(409);
    expect(Object.keys(dup.json())).toEqual(['error']);
    for (const bad of ['10.0.0.0/33', '300.1.1.1', 'not-an-ip', '10.0.0.0/8/8', '2001:db8::/129']) {
      const res = await add(bad);
      expect(res.statusCode, bad).toBe(422);
      expect(res.json().error, bad).toContain(bad);
    }
    const list = await stack.app.inject({ method: 'GET', url: url(), headers: auth });
    expect(list.json().entries.map((e: { cidr: string }) => e.cidr)).toEqual(['10.0.0.0/8', '2001:db8::/32']);
  });

  it('enforces the allowlist on API-key requests: 403 outside, 201 inside (v4, v6, and through a trusted proxy)', async () => {
    await eventually(async () => (await probe('192.0.2.7')) === 403, 'the allowlist to apply');
    const denied = await issue('192.0.2.7');
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toEqual({ error: "your IP address is not in this project's allowlist" });
    expect((await issue('10.9.8.7')).statusCode).toBe(201);
    expect(await probe('2001:db8::5')).toBe(400);
    expect(await probe('::ffff:10.0.0.1')).toBe(400);
    // Through the trusted proxy (127.0.0.1): the forwarded client address counts.
    expect(await probe('127.0.0.1', '10.1.1.1')).toBe(400);
    expect(await probe('127.0.0.1', '192.0.2.9')).toBe(403);
    // From an untrusted peer, X-Forwarded-For is ignored.
    expect(await probe('192.0.2.7', '10.1.1.1')).toBe(403);
  });

  it("answers 422 with the plan's limit once the free plan's entries are used up, and frees room on delete", async () => {
    expect((await add('192.168.0.0/16')).statusCode).toBe(201);
    const over = await add('172.16.0.0/12');
    expect(over.statusCode).toBe(422);
    expect(over.json().error).toMatch(/free plan allows at most 3/);
    const list = await stack.app.inject({ method: 'GET', url: url(), headers: auth });
    const v6 = list.json().entries.find((e: { cidr: string }) => e.cidr === '2001:db8::/32');
    const del = await stack.app.inject({ method: 'DELETE', url: `${url()}/${v6.id}`, headers: auth });
    expect(del.statusCode).toBe(204);
    const again = await stack.app.inject({ method: 'DELETE', url: `${url()}/${v6.id}`, headers: auth });
    expect(again.statusCode).toBe(404);
    expect((await add('172.16.0.0/12')).statusCode).toBe(201);
  });

  it("answers 404 for another tenant's project", async () => {
    const owner = await stack.ownerAuth();
    const res = await stack.app.inject({ method: 'GET', url: url(), headers: owner });
    expect(res.statusCode).toBe(404);
    const post = await stack.app.inject({
      method: 'POST',
      url: url(),
      headers: owner,
      payload: { cidr: '10.0.0.0/8' },
    });
    expect(post.statusCode).toBe(404);
  });
});
