import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as moqToken from '@moq/token';
import { grantProblem, type RelayGrant } from '@relayplane/contract/relay-auth';
import { importJWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { inProcessCli } from './support/cli.ts';
import { type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

/**
 * `POST /v1/relays/auth`, moq-relay's session contract (docs/credentials.md, "Sessions"), on the
 * real services (PostgreSQL, Redis) with a 1 s cadence: what a relay sends, exactly, and what it
 * must obey. The free plan's cap is 10 concurrent connections.
 */
describe('gateway routes: relay sessions (moq-relay auth contract)', () => {
  let stack: Stack;
  let t: Tenant;
  let projectId: string;
  let apiKey: string;
  const relays: { id: string; token: string }[] = [];
  let seq = 0;

  const basic = (relay: { id: string; token: string }) => ({
    authorization: `Basic ${Buffer.from(`${relay.id}:${relay.token}`).toString('base64')}`,
  });
  const sessionId = () => (++seq).toString(16).padStart(32, '0');

  async function registerRelay(host: string) {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: await stack.ownerAuth(),
      payload: { region: 'eu-west', host, port: 4433 },
    });
    expect(res.statusCode, res.body).toBe(201);
    const relay = { id: res.json().relay.id as string, token: res.json().token as string };
    const beat = await stack.app.inject({
      method: 'POST',
      url: '/v1/relays/heartbeat',
      headers: { authorization: `Bearer ${relay.token}` },
      payload: { load: 0.1 },
    });
    expect(beat.statusCode, beat.body).toBe(200);
    return relay;
  }

  /**
   * A tenant of its own for each test: credentials issued and not connected hold slots for the
   * connect window (60 s), so tests sharing a tenant would share its cap.
   */
  async function fresh(): Promise<void> {
    const n = ++seq;
    t = await tenant(stack, { email: `relay-sessions-${n}@example.test`, name: `Relay sessions ${n}` });
    projectId = await t.project('live');
    apiKey = (await t.apiKey(projectId, {})).key;
  }
  beforeEach(fresh);

  async function credential(
    payload: Record<string, unknown> = {},
    key = apiKey,
  ): Promise<{ token: string; jti: string }> {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api/v1/credentials',
      headers: { 'x-api-key': key },
      payload,
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  }

  function send(relay: { id: string; token: string }, body: Record<string, unknown>) {
    return stack.app.inject({ method: 'POST', url: '/v1/relays/auth', headers: basic(relay), payload: body });
  }
  const connect = (relay: { id: string; token: string }, id: string, token: string, extra = {}) =>
    send(relay, {
      id,
      event: 'connect',
      node: relay.id,
      transport: 'webtransport',
      remote: '203.0.113.9:4433',
      path: '/demo/room',
      query: `jwt=${token}`,
      ...extra,
    });
  const revalidate = (relay: { id: string; token: string }, id: string, token: string) =>
    send(relay, {
      id,
      event: 'revalidate',
      node: relay.id,
      transport: 'quic',
      path: '/demo/room',
      query: `jwt=${token}`,
    });
  const end = (relay: { id: string; token: string }, id: string, bytes = { sent: 10, received: 20 }) =>
    send(relay, {
      id,
      event: 'end',
      reason: 'disconnected',
      duration: 1.5,
      bytes,
      node: relay.id,
      transport: 'quic',
      path: '/demo/room',
    });

  function expectValidGrant(body: RelayGrant) {
    expect(grantProblem(body, Math.floor(Date.now() / 1000))).toBeUndefined();
  }

  beforeAll(async () => {
    // The pro plan revalidates every 40 s (plans file); the others at the issuer's 1 s.
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(plans, 'plans:\n  pro:\n    relay_session_revalidate_seconds: 40\n');
    stack = await startStack('gw_relay_sessions', {
      // The TLS-terminating proxy whose forwarded client certificates are believed (inject's peer).
      trustedProxies: ['127.0.0.1'],
      issuerEnv: {
        RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS: '1',
        RELAYPLANE_RELAY_SESSION_EXPIRES_SECONDS: '30',
      },
      billingEnv: { RELAYPLANE_PLANS_FILE: plans },
    });
    relays.push(await registerRelay('relay-a.example'), await registerRelay('relay-b.example'));
  });
  // After the stack's beforeAll: listens on the app it built.
  const cli = inProcessCli(() => stack.app, 'relay-sessions');
  afterAll(async () => {
    await stack?.close();
  });

  it('admits a connect authenticated with HTTP Basic from URL userinfo and answers a grant upstream would obey', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token } = await credential();
    const id = sessionId();
    const before = Math.floor(Date.now() / 1000);
    const res = await connect(relay, id, token);
    expect(res.statusCode, res.body).toBe(200);
    const grant = res.json<RelayGrant>();
    expectValidGrant(grant);
    expect(grant).toMatchObject({
      publish: ['**'],
      subscribe: ['**'],
      root: `${projectId}/demo/room`,
      revalidate: 1,
      tier: 'free',
    });
    expect(grant.expires).toBeGreaterThanOrEqual(before + 29);
    // The same id again: the same answer, one session.
    const again = await connect(relay, id, token);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(grant);
    const listed = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/sessions?state=live`,
      headers: t.auth,
    });
    expect(listed.statusCode, listed.body).toBe(200);
    const mine = listed.json<{ sessions: { id: string; relay_id: string; transport: string }[] }>().sessions;
    expect(mine.filter((s) => s.id === id)).toHaveLength(1);
    expect(mine.find((s) => s.id === id)).toMatchObject({ relay_id: relay.id, transport: 'webtransport' });
    expect(listed.body).not.toContain(token);
    expect((await end(relay, id)).statusCode).toBe(204);
  });

  it('limits a role to what it asked: a publisher gets publish only', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token } = await credential();
    const id = sessionId();
    const res = await connect(relay, id, token, { role: 'publisher' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ publish: ['**'] });
    expect(res.json().subscribe).toBeUndefined();
    expect((await end(relay, id)).statusCode).toBe(204);
  });

  it("refuses another relay's node (403), a Basic user that is not the token's relay (401), and bad credentials (403)", async () => {
    const [a, b] = relays as [{ id: string; token: string }, { id: string; token: string }];
    const { token } = await credential();
    const other = await send(a, {
      id: sessionId(),
      event: 'connect',
      node: b.id,
      transport: 'quic',
      path: '/x',
      query: `jwt=${token}`,
    });
    expect(other.statusCode).toBe(403);
    expect(other.json().error).toContain(a.id);
    const wrongUser = await stack.app.inject({
      method: 'POST',
      url: '/v1/relays/auth',
      headers: { authorization: `Basic ${Buffer.from(`${b.id}:${a.token}`).toString('base64')}` },
      payload: {
        id: sessionId(),
        event: 'connect',
        node: b.id,
        transport: 'quic',
        path: '/x',
        query: `jwt=${token}`,
      },
    });
    expect(wrongUser.statusCode).toBe(401);
    const none = await connect(a, sessionId(), '');
    expect(none.statusCode).toBe(403);
    expect(none.json().error).toMatch(/no credential/);
    const forged = await connect(a, sessionId(), `${token.slice(0, -4)}AAAA`);
    expect(forged.statusCode).toBe(403);
    expect(forged.json().error).toMatch(/invalid, expired or revoked/);
    const twoTokens = await connect(a, sessionId(), token, {
      token: { kind: 0, value: Buffer.from('something.else.entirely').toString('base64url') },
    });
    expect(twoTokens.statusCode).toBe(403);
    const noAuth = await stack.app.inject({
      method: 'POST',
      url: '/v1/relays/auth',
      payload: { id: sessionId(), event: 'connect', node: a.id, transport: 'quic', path: '/x' },
    });
    expect(noAuth.statusCode).toBe(401);
  });

  it('accepts the credential as a SETUP token of kind 0', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token } = await credential();
    const id = sessionId();
    const res = await send(relay, {
      id,
      event: 'connect',
      node: relay.id,
      transport: 'quic',
      path: '/demo',
      token: { kind: 0, value: Buffer.from(token).toString('base64url') },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect((await end(relay, id)).statusCode).toBe(204);
  });

  it('parses every upstream request vector (refused for their node, relay-1, never as malformed)', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const vectors = [
      '{"id":"00ff","event":"end","reason":"expired","duration":1.5,"bytes":{"sent":10,"received":20},"node":"relay-1","transport":"websocket","remote":"203.0.113.9:4433","path":"/demo/room","query":"jwt=abc"}',
      '{"id":"00ff","event":"end","reason":"invalid","duration":1.5,"bytes":{"sent":10,"received":20},"node":"relay-1","transport":"websocket","remote":"203.0.113.9:4433","path":"/demo/room","query":"jwt=abc"}',
      '{"id":"00ff","event":"connect","node":"relay-1","transport":"quic","path":"/demo/room","token":{"kind":1,"value":"APv_"}}',
      `{"id":"00ff","event":"connect","node":"relay-1","transport":"quic","remote":"203.0.113.9:4433","local":"[::1]:443","server_name":"relay.example","alpn":"moq-lite-05","path":"/demo/room","query":"jwt=abc","role":"publisher","tls":{"name":"edge0","fingerprint":"${'ab'.repeat(32)}","expires":4102444800,"issuer":"CN=cluster"}}`,
      '{"id":"00ff","event":"end","reason":"disconnected","duration":1.5,"bytes":{"sent":10,"received":20},"node":"relay-1","transport":"unix","path":""}',
      '{"id":"00ff","event":"connect","node":"relay-1","transport":"carrier-pigeon","path":"/","future_field":{"x":1}}',
    ];
    for (const vector of vectors) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/v1/relays/auth',
        headers: { ...basic(relay), 'content-type': 'application/json' },
        payload: vector,
      });
      expect(res.statusCode, `${vector}: ${res.body}`).toBe(403);
      expect(res.json().error).toContain('relay-1');
    }
  });

  it('caps live sessions at the plan (10): a second parallel session of one credential needs a slot; end frees it at once', async () => {
    const [a, b] = relays as [{ id: string; token: string }, { id: string; token: string }];
    const { token } = await credential();
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const id = sessionId();
      const res = await connect(i % 2 === 0 ? a : b, id, token);
      expect(res.statusCode, `session ${i + 1}: ${res.body}`).toBe(200);
      ids.push(id);
    }
    const over = await connect(a, sessionId(), token);
    expect(over.statusCode).toBe(403);
    expect(over.json().error).toMatch(/10/);
    // Issuance is at the cap too.
    const issue = await stack.app.inject({
      method: 'POST',
      url: '/api/v1/credentials',
      headers: { 'x-api-key': apiKey },
      payload: {},
    });
    expect(issue.statusCode).toBe(402);
    expect((await end(a, ids[0] as string)).statusCode).toBe(204);
    const next = sessionId();
    expect((await connect(a, next, token)).statusCode).toBe(200);
    ids[0] = next;
    for (const [i, id] of ids.entries()) expect((await end(i % 2 === 0 ? a : b, id)).statusCode).toBe(204);
  });

  it('frees the slots of a relay that died without end within two cadences (2 s)', async () => {
    const [a] = relays as [{ id: string; token: string }];
    const { token } = await credential();
    for (let i = 0; i < 10; i++) expect((await connect(a, sessionId(), token)).statusCode).toBe(200);
    expect((await connect(a, sessionId(), token)).statusCode).toBe(403);
    await new Promise((resolve) => setTimeout(resolve, 2_300));
    const id = sessionId();
    expect((await connect(a, id, token)).statusCode).toBe(200);
    expect((await end(a, id)).statusCode).toBe(204);
  });

  it('renews the grant at each revalidate and refuses it once the credential is revoked', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token, jti } = await credential();
    const id = sessionId();
    const first = await connect(relay, id, token);
    expect(first.statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const again = await revalidate(relay, id, token);
    expect(again.statusCode, again.body).toBe(200);
    expectValidGrant(again.json());
    expect(again.json().expires).toBeGreaterThan(first.json().expires);
    // Another relay cannot revalidate it.
    expect((await revalidate(relays[1] as { id: string; token: string }, id, token)).statusCode).toBe(403);
    const revoke = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/credentials/${jti}/revoke`,
      headers: t.auth,
    });
    expect(revoke.statusCode, revoke.body).toBe(200);
    const refused = await revalidate(relay, id, token);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatch(/revoked/);
    const listed = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/sessions?state=ended`,
      headers: t.auth,
    });
    expect(listed.json().sessions.find((s: { id: string }) => s.id === id)).toMatchObject({
      reason: 'revoked',
    });
    // The relay's own end still records what it saw.
    expect((await end(relay, id, { sent: 5, received: 6 })).statusCode).toBe(204);
  });

  it('ends a session from the control plane: the next revalidate is refused; the end records bytes and duration', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token } = await credential();
    const id = sessionId();
    expect((await connect(relay, id, token)).statusCode).toBe(200);
    const ended = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/sessions/${id}/end`,
      headers: t.auth,
    });
    expect(ended.statusCode, ended.body).toBe(200);
    expect(ended.json()).toMatchObject({ id, reason: 'ended_by_admin' });
    expect(ended.json().ended_at).toEqual(expect.any(String));
    const refused = await revalidate(relay, id, token);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatch(/ended/);
    expect((await end(relay, id, { sent: 1000, received: 2000 })).statusCode).toBe(204);
    const listed = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/sessions?state=ended`,
      headers: t.auth,
    });
    expect(listed.json().sessions.find((s: { id: string }) => s.id === id)).toMatchObject({
      reason: 'ended_by_admin',
      duration_seconds: 1.5,
      bytes: { sent: 1000, received: 2000 },
    });
    // Another tenant cannot end it (404), nor see it.
    const other = await tenant(stack, { email: 'relay-sessions-other@example.test', name: 'Other' });
    const foreign = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/sessions/${id}/end`,
      headers: other.auth,
    });
    expect(foreign.statusCode).toBe(404);
    const foreignList = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/sessions`,
      headers: other.auth,
    });
    expect(foreignList.statusCode).toBe(404);
  });

  it('answers sessions it never admitted: revalidate 403, end 404; a malformed event 400', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    expect((await revalidate(relay, sessionId(), 'x')).statusCode).toBe(403);
    expect((await end(relay, sessionId())).statusCode).toBe(404);
    const noFacts = await send(relay, {
      id: sessionId(),
      event: 'end',
      node: relay.id,
      transport: 'quic',
      path: '/',
    });
    expect(noFacts.statusCode).toBe(400);
    expect(noFacts.json()).toEqual({ error: expect.stringMatching(/reason, duration and bytes/) });
    const badEvent = await send(relay, {
      id: sessionId(),
      event: 'pause',
      node: relay.id,
      transport: 'quic',
      path: '/',
    });
    expect(badEvent.statusCode).toBe(400);
    const badId = await send(relay, {
      id: 'ZZ',
      event: 'connect',
      node: relay.id,
      transport: 'quic',
      path: '/',
    });
    expect(badId.statusCode).toBe(400);
  });

  it('serves each JWKS key as {kid}.jwk in the form @moq/token loads as a public key, and it verifies a path-scoped credential', async () => {
    const set = await stack.app.inject({ method: 'GET', url: '/v1/credentials/jwks' });
    const kids = set.json<{ keys: { kid: string }[] }>().keys.map((k) => k.kid);
    const { token } = await credential({ root: '/room/7', publish: ['alice/**'], subscribe: ['**'] });
    const kid = JSON.parse(Buffer.from(token.split('.')[0] as string, 'base64url').toString()).kid as string;
    expect(kids).toContain(kid);
    const res = await stack.app.inject({ method: 'GET', url: `/v1/credentials/jwks/${kid}.jwk` });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.json()).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid, alg: 'EdDSA', key_ops: ['verify'] });
    // moq's own library loads it as a public key (alg EdDSA, key_ops with verify)…
    const key = moqToken.loadPublic(res.body);
    expect(key.alg).toBe('EdDSA');
    // …and the key verifies the credential's signature.
    const verified = await jwtVerify(token, await importJWK(res.json(), 'EdDSA'), { algorithms: ['EdDSA'] });
    expect(verified.payload.jti).toEqual(expect.stringMatching(/^crd_/));
    // @moq/token's own verify: the signature with the .jwk key, then moq's claims, for the root
    // the credential was issued for (beneath its project id).
    const claims = await moqToken.verify(key, token, `${projectId}/room/7`);
    expect(claims).toMatchObject({ root: `${projectId}/room/7`, put: ['alice'], get: [''] });
    await expect(moqToken.verify(key, token, `${projectId}/room/8`)).rejects.toThrow(/path does not match/);
    // Patterns a prefix cannot say travel as publish/subscribe, which @moq/token 0.2 refuses
    // rather than misreads (it knows only put/get), as upstream intends.
    const exact = await credential({ root: 'room/7', publish: ['alice'] });
    await expect(moqToken.verify(key, exact.token, `${projectId}/room/7`)).rejects.toThrow(/put or get/);
    expect(
      (await stack.app.inject({ method: 'GET', url: `/v1/credentials/jwks/${'A'.repeat(43)}.jwk` }))
        .statusCode,
    ).toBe(404);
    expect(
      (await stack.app.inject({ method: 'GET', url: '/v1/credentials/jwks/bad%20kid.jwk' })).statusCode,
    ).toBe(400);
  });

  it("grants a path-scoped credential's patterns at the dialed path, as moq-relay would decide them offline", async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token } = await credential({ root: 'room/7', publish: ['alice/**'], subscribe: ['**'] });
    // The path reaches into the credential's root: each pattern narrowed to what is left below it.
    const deep = await connect(relay, sessionId(), token, { path: '/room/7/alice' });
    expect(deep.statusCode, deep.body).toBe(200);
    expect(deep.json()).toMatchObject({
      root: `${projectId}/room/7/alice`,
      publish: ['**'],
      subscribe: ['**'],
    });
    expectValidGrant(deep.json());
    const atRoot = await connect(relay, sessionId(), token, { path: '/room/7' });
    expect(atRoot.json()).toMatchObject({
      root: `${projectId}/room/7`,
      publish: ['alice/**'],
      subscribe: ['**'],
    });
    // Above the root: the root's extra segments are prepended.
    const above = await connect(relay, sessionId(), token, { path: '/room' });
    expect(above.json()).toMatchObject({
      root: `${projectId}/room`,
      publish: ['7/alice/**'],
      subscribe: ['7/**'],
    });
    // Beside it: refused, with the reason the relay logs.
    const beside = await connect(relay, sessionId(), token, { path: '/room/8' });
    expect(beside.statusCode).toBe(403);
    expect(beside.json().error).toMatch(/does not cover the path/);
    // A subscriber at a path where only publishing was granted gets nothing: refused.
    const bob = await credential({ root: 'room/7', publish: ['alice'] });
    const sub = await connect(relay, sessionId(), bob.token, { path: '/room/7', role: 'subscriber' });
    expect(sub.statusCode).toBe(403);
    const pubId = sessionId();
    const pub = await connect(relay, pubId, bob.token, { path: '/room/7', role: 'publisher' });
    expect(pub.json()).toMatchObject({ publish: ['alice'] });
    expect(pub.json()).not.toHaveProperty('subscribe');
    // Revalidations answer the same patterns.
    const again = await revalidate(relay, pubId, bob.token);
    expect(again.json()).toMatchObject({ publish: ['alice'] });
  });

  it("bounds every credential of an API key by the key's ceiling: within it as asked, none asked the ceiling, beyond it 403", async () => {
    const created = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: { authorization: `Bearer ${t.token}` },
      payload: { name: 'studio', ceiling: { root: '/live/', publish: ['studio/**'] } },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().api_key.ceiling).toEqual({ root: 'live', publish: ['studio/**'], subscribe: [] });
    const key = created.json().key as string;
    const listed = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: { authorization: `Bearer ${t.token}` },
    });
    expect(listed.json().api_keys.find((k: { name: string }) => k.name === 'studio').ceiling).toEqual({
      root: 'live',
      publish: ['studio/**'],
      subscribe: [],
    });
    const claimsOf = (token: string) =>
      JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as Record<
        string,
        unknown
      >;
    // Nothing asked: the ceiling, narrowed to the roles it grants.
    expect(claimsOf((await credential({}, key)).token)).toMatchObject({
      root: `${projectId}/live`,
      put: ['studio'],
    });
    expect(claimsOf((await credential({}, key)).token)).not.toHaveProperty('get');
    // Within it: as asked.
    expect(
      claimsOf((await credential({ root: 'live/studio/a', publish: ['cam'] }, key)).token),
    ).toMatchObject({
      root: `${projectId}/live/studio/a`,
      publish: ['cam'],
    });
    // Beyond it: 403 naming the pattern; a malformed request: 400.
    for (const payload of [{ root: 'lively' }, { root: 'live', subscribe: ['**'] }, { publish: ['**'] }]) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/api/v1/credentials',
        headers: { 'x-api-key': key },
        payload,
      });
      expect(res.statusCode, JSON.stringify(payload)).toBe(403);
      expect(res.json().error).toMatch(/exceeds the API key's ceiling/);
    }
    const malformed = await stack.app.inject({
      method: 'POST',
      url: '/api/v1/credentials',
      headers: { 'x-api-key': key },
      payload: { root: 'live', publish: ['studio//x'] },
    });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error).toMatch(/^publish: "studio\/\/x" is not a moq pattern/);
    // A ceiling is checked at the key's creation.
    for (const ceiling of [{ root: 'live' }, { publish: ['/x'] }, { root: 'a/*', publish: ['**'] }]) {
      const res = await stack.app.inject({
        method: 'POST',
        url: `/admin/v1/projects/${projectId}/api-keys`,
        headers: { authorization: `Bearer ${t.token}` },
        payload: { ceiling },
      });
      expect(res.statusCode, JSON.stringify(ceiling)).toBe(400);
      expect(res.json().error).toMatch(/^ceiling/);
    }
  });

  it("revalidates at the plan's cadence where the plans file sets one (the grant lasting at least two cadences)", async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const before = await connect(relay, sessionId(), (await credential()).token);
    expect(before.json()).toMatchObject({ revalidate: 1 });
    const upgraded = await stack.app.inject({
      method: 'PUT',
      url: `/admin/v1/tenants/${t.tenantId}/plan`,
      headers: await stack.ownerAuth(),
      payload: { plan: 'pro' },
    });
    expect(upgraded.statusCode, upgraded.body).toBe(200);
    const id = sessionId();
    const after = await connect(relay, id, (await credential()).token);
    expect(after.statusCode, after.body).toBe(200);
    expect(after.json()).toMatchObject({ revalidate: 40, tier: 'pro' });
    const now = Math.floor(Date.now() / 1000);
    // 30 s configured, 80 s (two cadences) granted.
    expect(after.json().expires).toBeGreaterThanOrEqual(now + 79);
    expectValidGrant(after.json());
    const again = await revalidate(relay, id, (await credential()).token);
    expect(again.json()).toMatchObject({ revalidate: 40 });
  });

  it('authenticates a relay by a client certificate registered for it, as a trusted TLS-terminating proxy forwards it', async () => {
    // A self-signed certificate for the relay (openssl req -x509 -newkey ed25519), and its SHA-256.
    const pem = `-----BEGIN CERTIFICATE-----
MIIBSjCB/aADAgECAhRF0p1A0cNgTfCepTzGcFnJaq7rATAFBgMrZXAwGjEYMBYG
A1UEAwwPcmVsYXktYy5leGFtcGxlMCAXDTI2MTEyOTA1MDEzMloYDzIxMjYxMTA1
MDUwMTMyWjAaMRgwFgYDVQQDDA9yZWxheS1jLmV4YW1wbGUwKjAFBgMrZXADIQB9
f+iNYoGkWAFwWPp7/mPGHFGfqpkg8Rl46CpJzvHQbqNTMFEwHQYDVR0OBBYEFK6b
kn8myMqideZt7pxq6JRBvXTTMB8GA1UdIwQYMBaAFK6bkn8myMqideZt7pxq6JRB
vXTTMA8GA1UdEwEB/wQFMAMBAf8wBQYDK2VwA0EAGw0tD+22w+9tR7VpJ/KVnPbp
TXcF1sM4eYjWdqnqyVfXu7WDUVWJ8P984BTKSR653ioVTi7+UYmkEWktd9WlBQ==
-----END CERTIFICATE-----`;
    const sha256 =
      'E5:92:86:62:03:37:1C:92:80:33:95:3C:E8:7D:E9:C8:3D:AF:C6:B2:D1:8F:76:49:42:C9:2E:1F:CA:94:9A:96';
    const hex = sha256.replaceAll(':', '').toLowerCase();
    const registered = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: await stack.ownerAuth(),
      payload: {
        region: 'eu-west',
        host: 'relay-cert.example',
        port: 4433,
        client_certificate_sha256: sha256,
      },
    });
    expect(registered.statusCode, registered.body).toBe(201);
    const relay = registered.json().relay as { id: string; client_certificate_sha256: string };
    expect(relay.client_certificate_sha256).toBe(hex);
    // The same certificate for another relay: 409; a malformed fingerprint: 400.
    const twice = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: await stack.ownerAuth(),
      payload: { region: 'eu-west', host: 'relay-cert2.example', port: 4433, client_certificate_sha256: hex },
    });
    expect(twice.statusCode).toBe(409);
    expect(twice.json().error).toMatch(/client certificate is already registered/);
    const malformed = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: await stack.ownerAuth(),
      payload: {
        region: 'eu-west',
        host: 'relay-cert3.example',
        port: 4433,
        client_certificate_sha256: 'abc',
      },
    });
    expect(malformed.statusCode).toBe(400);
    const { token } = await credential();
    const event = (id: string) => ({
      id,
      event: 'connect',
      node: relay.id,
      transport: 'quic',
      path: '/demo',
      query: `jwt=${token}`,
    });
    const viaProxy = (headers: Record<string, string>, remoteAddress = '127.0.0.1') =>
      stack.app.inject({
        method: 'POST',
        url: '/v1/relays/auth',
        headers,
        remoteAddress,
        payload: event(sessionId()),
      });
    // Envoy / Istio: X-Forwarded-Client-Cert with the certificate's Hash.
    const envoy = await viaProxy({
      'x-forwarded-client-cert': `Hash=${hex};Subject="CN=relay-c.example,O=Relays, Inc.";URI=`,
    });
    expect(envoy.statusCode, envoy.body).toBe(200);
    expectValidGrant(envoy.json());
    // ingress-nginx: the URL-encoded PEM, verified by the proxy.
    const nginx = await viaProxy({
      'ssl-client-cert': encodeURIComponent(pem),
      'ssl-client-verify': 'SUCCESS',
    });
    expect(nginx.statusCode, nginx.body).toBe(200);
    // Refused: not verified by the proxy, two XFCC elements, a certificate no relay has, and the
    // same headers from a peer that is not a trusted proxy (ignored: no credential at all).
    const refusals: [Record<string, string>, string, RegExp][] = [
      [
        { 'ssl-client-cert': encodeURIComponent(pem), 'ssl-client-verify': 'FAILED:self signed' },
        '127.0.0.1',
        /not verified/,
      ],
      [
        { 'x-forwarded-client-cert': `Hash=${hex},Hash=${'0'.repeat(64)}` },
        '127.0.0.1',
        /exactly one element/,
      ],
      [
        { 'x-forwarded-client-cert': `Hash=${'0'.repeat(64)}` },
        '127.0.0.1',
        /no relay is registered with this client certificate/,
      ],
      [{ 'x-forwarded-client-cert': `Hash=${hex}` }, '203.0.113.7', /./],
    ];
    for (const [headers, peer, message] of refusals) {
      const res = await viaProxy(headers, peer);
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.json().error).toMatch(message);
    }
  });

  it('lists and ends relay sessions from the CLI (relayplane relay-sessions)', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token, jti } = await credential();
    const id = sessionId();
    expect((await connect(relay, id, token)).statusCode).toBe(200);
    const live = await cli(['relay-sessions', projectId, '--state', 'live', '--json'], t.token);
    expect(live.code, live.stderr).toBe(0);
    expect(JSON.parse(live.stdout).sessions).toEqual([
      expect.objectContaining({ id, jti, relay_id: relay.id }),
    ]);
    expect(live.stdout).not.toContain(token);
    const table = await cli(['relay-sessions', projectId], t.token);
    expect(table.code).toBe(0);
    expect(table.stdout).toContain(id);
    const ended = await cli(['relay-sessions', 'end', id, '--json'], t.token);
    expect(ended.code, ended.stderr).toBe(0);
    expect(JSON.parse(ended.stdout)).toMatchObject({ id, reason: 'ended_by_admin' });
    expect((await revalidate(relay, id, token)).statusCode).toBe(403);
    const missing = await cli(['relay-sessions', 'end', 'ffff'], t.token);
    expect(missing.code).toBe(5);
    const badState = await cli(['relay-sessions', projectId, '--state', 'paused'], t.token);
    expect(badState.code).not.toBe(0);
    expect(badState.stderr).toMatch(/live or ended/);
  });

  it('shows the minutes and bytes of ended sessions in the daily usage', async () => {
    const [relay] = relays as [{ id: string; token: string }];
    const { token } = await credential();
    const id = sessionId();
    expect((await connect(relay, id, token)).statusCode).toBe(200);
    const ended = await send(relay, {
      id,
      event: 'end',
      reason: 'done',
      duration: 150,
      bytes: { sent: 4_000_000, received: 25_000 },
      node: relay.id,
      transport: 'quic',
      path: '/demo/room',
    });
    expect(ended.statusCode).toBe(204);
    const today = new Date().toISOString().slice(0, 10);
    await stack.billing.usage.aggregateDay(today);
    const usage = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/billing/usage?from=${today}&to=${today}`,
      headers: t.auth,
    });
    expect(usage.statusCode, usage.body).toBe(200);
    const days = usage.json<{ days: { project_id: string | null }[] }>().days;
    for (const projectRow of [null, projectId]) {
      expect(days.find((d) => d.project_id === projectRow)).toMatchObject({
        day: today,
        sessions_ended: 1,
        session_minutes: 2.5,
        bytes_sent: 4_000_000,
        bytes_received: 25_000,
        credentials_issued: 1,
      });
    }
  });
});
