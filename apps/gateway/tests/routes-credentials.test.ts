import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

/** The credential path through the gateway: API keys, issuance, verification, revocation, relays. */
describe('gateway routes: relay credentials', () => {
  let stack: Stack;
  let owner: { authorization: string };
  let free: { authorization: string };
  let projectId: string;
  let apiKey: string;
  let apiKeyId: string;
  let relayToken: string;

  beforeAll(async () => {
    stack = await startStack('gw_creds');
    owner = await stack.ownerAuth();
    const freeTenant = await tenant(stack, { email: 'free@example.test', name: 'Free Co' });
    free = freeTenant.auth;
    projectId = await freeTenant.project('live');
    const key = await freeTenant.apiKey(projectId, {
      name: 'backend',
      scopes: ['relay:session', 'relay:subscribe'],
    });
    apiKey = key.key;
    apiKeyId = key.id;
    const relay = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: owner,
      payload: { region: 'eu-west', host: 'relay-1.example', port: 4433 },
    });
    expect(relay.statusCode).toBe(201);
    relayToken = relay.json().token;
    const beat = await stack.app.inject({
      method: 'POST',
      url: '/v1/relays/heartbeat',
      headers: { authorization: `Bearer ${relayToken}` },
      payload: { load: 0.25 },
    });
    expect(beat.statusCode).toBe(200);
  });
  afterAll(async () => {
    await stack?.close();
  });

  const issue = (payload: object = {}, key = apiKey) =>
    stack.app.inject({ method: 'POST', url: '/api/v1/credentials', headers: { 'x-api-key': key }, payload });

  it('creates an API key shown once: svc_live_ + 64 hex; lists show only prefix and last four', async () => {
    expect(apiKey).toMatch(/^svc_live_[0-9a-f]{64}$/);
    const list = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: free,
    });
    expect(list.statusCode).toBe(200);
    const [listed] = list.json().api_keys;
    expect(listed).toMatchObject({
      id: apiKeyId,
      display_prefix: apiKey.slice(0, 13),
      last_four: apiKey.slice(-4),
    });
    expect(list.body).not.toContain(apiKey);
  });

  it('issues a credential (201) that verifies with jose against the JWKS, with the documented claims', async () => {
    const res = await issue({ ttl_seconds: 300, region: 'eu-west' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['expires_at', 'fallback', 'jti', 'relays', 'token']);
    const jwks = (await stack.app.inject({ method: 'GET', url: '/v1/credentials/jwks' })).json();
    const header = decodeProtectedHeader(body.token);
    expect(header).toMatchObject({ alg: 'EdDSA', typ: 'JWT' });
    expect(jwks.keys.map((k: { kid: string }) => k.kid)).toContain(header.kid);
    const { payload } = await jwtVerify(body.token, createLocalJWKSet(jwks), {
      algorithms: ['EdDSA'],
      issuer: 'relayplane',
      audience: 'relayplane-relay',
    });
    expect(payload).toMatchObject({
      sub: projectId,
      pid: projectId,
      jti: body.jti,
      scope: 'relay:session',
      mode: 'live',
      akid: apiKeyId,
      rgn: 'eu-west',
    });
    expect(payload.exp).toBe((payload.iat ?? 0) + 300);
    expect(Date.parse(body.expires_at)).toBe((payload.exp ?? 0) * 1000);
    expect(body.relays[0]).toEqual({
      id: expect.any(String),
      region: 'eu-west',
      host: 'relay-1.example',
      port: 4433,
      url: 'https://relay-1.example:4433',
      status: 'healthy',
    });
  });

  it('rejects bad issuance requests with their exact status and {error}', async () => {
    const cases: [object, number, RegExp][] = [
      [{ scopes: ['relay:nope'] }, 400, /unknown scope "relay:nope"/],
      [{ scopes: ['relay:publish'] }, 403, /not granted to this API key/],
      [{ ttl_seconds: 59 }, 400, /ttl_seconds/],
      [{ ttl_seconds: 3601 }, 400, /ttl_seconds/],
      [{ ttl_seconds: 1800 }, 400, /maximum of 900/],
      [{ ttl_seconds: '600' }, 400, /ttl_seconds/],
      [{ extra: true }, 400, /unknown field "extra"/],
    ];
    for (const [payload, status, message] of cases) {
      const res = await issue(payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(status);
      expect(Object.keys(res.json())).toEqual(['error']);
      expect(res.json().error).toMatch(message);
    }
  });

  it('revokes a credential: 200 {jti, revoked_at}, idempotent; then introspection is inactive, assignment 401, and the feed has it', async () => {
    const { jti, token } = (await issue()).json();
    const relayAuth = { authorization: `Bearer ${relayToken}` };
    const active = await stack.app.inject({
      method: 'POST',
      url: '/v1/credentials/introspect',
      headers: relayAuth,
      payload: { token },
    });
    expect(active.json()).toMatchObject({ active: true, jti, pid: projectId });
    const assigned = await stack.app.inject({
      method: 'GET',
      url: '/v1/relays/assignment',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(assigned.statusCode).toBe(200);

    const first = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/credentials/${jti}/revoke`,
      headers: free,
    });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ jti, revoked_at: expect.any(String) });
    const again = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/credentials/${jti}/revoke`,
      headers: free,
    });
    expect(again.json()).toEqual(first.json());

    const form = await stack.app.inject({
      method: 'POST',
      url: '/v1/credentials/introspect',
      headers: { ...relayAuth, 'content-type': 'application/x-www-form-urlencoded' },
      payload: `token=${token}`,
    });
    expect(form.json()).toEqual({ active: false });
    const denied = await stack.app.inject({
      method: 'GET',
      url: '/v1/relays/assignment',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(denied.statusCode).toBe(401);
    expect(denied.json()).toEqual({ error: 'invalid or expired token' });
    const feed = await stack.app.inject({
      method: 'GET',
      url: '/v1/credentials/revocations?cursor=0',
      headers: relayAuth,
    });
    expect(feed.statusCode).toBe(200);
    expect(feed.json().revocations.map((r: { jti: string }) => r.jti)).toContain(jti);
  });

  it("answers 404 for another tenant's credential", async () => {
    const { jti } = (await issue()).json();
    const res = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/credentials/${jti}/revoke`,
      headers: owner,
    });
    expect(res.statusCode).toBe(404);
    expect(Object.keys(res.json())).toEqual(['error']);
  });

  it('answers 402 at the plan cap (free: 10 live credentials) and frees a slot on revocation', async () => {
    // Other tests of this file hold some slots already; fill up to the cap.
    const issued: string[] = [];
    for (;;) {
      const res = await issue();
      if (res.statusCode === 402) {
        expect(res.json().error).toMatch(/upgrade/);
        break;
      }
      expect(res.statusCode).toBe(201);
      issued.push(res.json().jti);
      expect(issued.length).toBeLessThanOrEqual(10);
    }
    const revoke = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/credentials/${issued[0]}/revoke`,
      headers: free,
    });
    expect(revoke.statusCode).toBe(200);
    expect((await issue()).statusCode).toBe(201);
    expect((await issue()).statusCode).toBe(402);
  });

  it('a revoked API key stops working at once (401), and the plan limit on keys answers 402', async () => {
    const second = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: free,
      payload: {},
    });
    expect(second.statusCode).toBe(201);
    const third = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: free,
      payload: {},
    });
    expect(third.statusCode).toBe(402);
    expect(third.json().error).toMatch(/API keys/);
    const key = second.json().key;
    const before = await issue({}, key);
    expect([201, 402]).toContain(before.statusCode); // authenticated (the cap may be reached)
    const del = await stack.app.inject({
      method: 'DELETE',
      url: `/admin/v1/projects/${projectId}/api-keys/${second.json().api_key.id}`,
      headers: free,
    });
    expect(del.statusCode).toBe(200);
    expect(del.json().revoked_at).toEqual(expect.any(String));
    const after = await issue({}, key);
    expect(after.statusCode).toBe(401);
    expect(after.json()).toEqual({ error: 'invalid or expired token' });
  });
});
