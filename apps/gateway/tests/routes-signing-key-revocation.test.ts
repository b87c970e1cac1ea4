/**
 * POST /admin/v1/signing-keys/{kid}/revoke through the gateway's in-process stack (real
 * issuer, admin and billing on PostgreSQL and Redis): who may call it, what it answers, the
 * audit event it writes, and what the revoked key's credentials get afterwards.
 */
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

const UA = 'signing-key-revocation-test/1.0';

describe('gateway routes: revoking a signing key', () => {
  let stack: Stack;
  let owner: { authorization: string };
  let customer: Tenant;
  let apiKey: string;
  let relayAuth: { authorization: string };

  beforeAll(async () => {
    stack = await startStack('gw_key_revoke');
    owner = await stack.ownerAuth();
    customer = await tenant(stack, { email: 'customer@example.test', name: 'Customer Co' });
    const projectId = await customer.project('live');
    apiKey = (await customer.apiKey(projectId, { scopes: ['relay:session'] })).key;
    const relay = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: owner,
      payload: { region: 'eu-west', host: 'relay-1.example', port: 4433 },
    });
    expect(relay.statusCode).toBe(201);
    relayAuth = { authorization: `Bearer ${relay.json().token}` };
    const beat = await stack.app.inject({
      method: 'POST',
      url: '/v1/relays/heartbeat',
      headers: relayAuth,
      payload: { load: 0.1 },
    });
    expect(beat.statusCode).toBe(200);
  });
  afterAll(async () => {
    await stack?.close();
  });

  const revoke = (kid: string, headers: Record<string, string> = owner) =>
    stack.app.inject({
      method: 'POST',
      url: `/admin/v1/signing-keys/${encodeURIComponent(kid)}/revoke`,
      headers: { 'user-agent': UA, ...headers },
    });
  const keys = async () =>
    (
      await stack.app.inject({ method: 'GET', url: '/admin/v1/signing-keys?limit=200', headers: owner })
    ).json<{
      keys: { kid: string; state: string }[];
    }>().keys;
  const kidIn = async (state: string) => (await keys()).find((k) => k.state === state)?.kid ?? '';
  const jwks = async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/v1/credentials/jwks' });
    return { kids: res.json<{ keys: { kid: string }[] }>().keys.map((k) => k.kid), etag: res.headers.etag };
  };
  const issue = async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api/v1/credentials',
      headers: { 'x-api-key': apiKey },
      payload: {},
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json<{ token: string; jti: string }>();
  };
  const introspect = async (token: string) =>
    (
      await stack.app.inject({
        method: 'POST',
        url: '/v1/credentials/introspect',
        headers: relayAuth,
        payload: { token },
      })
    ).json<{ active: boolean }>().active;
  const assignment = async (token: string) =>
    stack.app.inject({
      method: 'GET',
      url: '/v1/relays/assignment',
      headers: { authorization: `Bearer ${token}` },
    });

  it('refuses anyone but a platform administrator: 401 without a session, 403 for a tenant owner; nothing revoked', async () => {
    const active = await kidIn('active');
    const anonymous = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/signing-keys/${active}/revoke`,
    });
    expect(anonymous.statusCode).toBe(401);
    const denied = await revoke(active, customer.auth);
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toEqual({ error: 'this operation needs a platform administrator' });
    expect(await kidIn('active')).toBe(active);
    expect((await jwks()).kids).toContain(active);
  });

  it('answers 404 {error} for a kid no key has (414 for a path segment past the router limit)', async () => {
    for (const kid of ['no-such-kid', 'x'.repeat(100), 'a.b', "k' or 1=1"]) {
      const res = await revoke(kid);
      expect(res.statusCode, kid).toBe(404);
      expect(res.json()).toEqual({ error: 'signing key not found' });
    }
    const long = await revoke('x'.repeat(300));
    expect(long.statusCode).toBe(414);
    expect(Object.keys(long.json())).toEqual(['error']);
  });

  it('revokes the active key: 200 with the key and its replacement, out of the JWKS at once, its credentials 401 and inactive, audited', async () => {
    const compromised = await kidIn('active');
    const next = await kidIn('next');
    const before = await jwks();
    expect(before.kids).toEqual([compromised, next]);
    const signed = await issue();
    expect(decodeProtectedHeader(signed.token).kid).toBe(compromised);
    expect(await introspect(signed.token)).toBe(true);

    const res = await revoke(compromised);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      revoked: { kid: compromised, state: 'removed' },
      active: { kid: next, state: 'active' },
      already_revoked: false,
    });
    expect(Date.parse(body.revoked.revoked_at)).toBe(Date.parse(body.revoked.removed_at));

    // This gateway serves the set without it within a second (bus message), the replacement first.
    const started = performance.now();
    let after = await jwks();
    while (after.kids.includes(compromised) && performance.now() - started < 1_000) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      after = await jwks();
    }
    expect(after.kids).not.toContain(compromised);
    expect(after.kids[0]).toBe(next);
    expect(after.etag).not.toBe(before.etag);

    expect(await introspect(signed.token)).toBe(false);
    const refused = await assignment(signed.token);
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({ error: 'invalid or expired token' });
    const fresh = await issue();
    expect(decodeProtectedHeader(fresh.token).kid).toBe(next);
    expect(await introspect(fresh.token)).toBe(true);
    expect((await assignment(fresh.token)).statusCode).toBe(200);

    // The feed names the kid.
    const feed = await stack.app.inject({
      method: 'GET',
      url: '/v1/credentials/revocations?cursor=0',
      headers: relayAuth,
    });
    expect(feed.statusCode).toBe(200);
    expect(feed.json().revoked_keys).toEqual([{ kid: compromised, revoked_at: body.revoked.revoked_at }]);

    // The event, written in the issuer's audit outbox with the revocation: the caller, no key material.
    const outbox = () =>
      stack.issuer.database.db
        .selectFrom('audit_outbox')
        .selectAll()
        .where('action', '=', 'signing_key.revoke')
        .execute();
    const rows = { rows: await outbox() };
    expect(rows.rows).toHaveLength(1);
    const me = (
      await stack.app.inject({ method: 'GET', url: '/admin/v1/auth/session', headers: owner })
    ).json<{ user: { id: string } }>().user.id;
    expect(rows.rows[0]).toMatchObject({
      action: 'signing_key.revoke',
      actor_type: 'user',
      actor_id: me,
      target_type: 'signing_key',
      target_id: compromised,
      tenant_id: null,
      user_agent: UA,
    });
    const details =
      typeof rows.rows[0]?.details === 'string' ? JSON.parse(rows.rows[0].details) : rows.rows[0]?.details;
    expect(details).toEqual({ state: 'active', promoted_kid: next, requested_by: me });

    // A repeat: 200, already_revoked, nothing changed and nothing more recorded.
    const again = await revoke(compromised);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({
      revoked: { kid: compromised, revoked_at: body.revoked.revoked_at },
      active: { kid: next },
      already_revoked: true,
    });
    expect(await outbox()).toHaveLength(1);

    // The listing shows it removed, with a new next key published.
    const listed = await keys();
    expect(listed.find((k) => k.kid === compromised)?.state).toBe('removed');
    expect(listed.filter((k) => k.state === 'next')).toHaveLength(1);
    expect(await kidIn('next')).not.toBe(next);
  });
});
