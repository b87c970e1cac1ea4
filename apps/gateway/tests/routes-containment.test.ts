import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

/**
 * Containment of a leaked API key through the gateway (docs/credentials.md, "Containment"), on
 * the real services (PostgreSQL, Redis): the key's DELETE revokes its credentials before the key,
 * and says so when the second step fails; the bulk route by key leaves the key usable; bad input
 * is 400.
 */
describe('gateway routes: containment of a leaked API key', () => {
  let stack: Stack;
  let relayAuth: { authorization: string };
  let seq = 0;

  beforeAll(async () => {
    stack = await startStack('gw_contain');
    const relay = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: await stack.ownerAuth(),
      payload: { region: 'eu-west', host: 'relay-1.example', port: 4433 },
    });
    expect(relay.statusCode, relay.body).toBe(201);
    relayAuth = { authorization: `Bearer ${relay.json().token}` };
    const beat = await stack.app.inject({
      method: 'POST',
      url: '/v1/relays/heartbeat',
      headers: relayAuth,
      payload: { load: 0.25 },
    });
    expect(beat.statusCode).toBe(200);
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** Raw SQL on admin's database (PostgreSQL only). */
  let statements = 0;
  async function ddl(text: string) {
    const run = stack.admin.database.prepared;
    if (!run) throw new Error('PostgreSQL only');
    await run(`gw_contain_test_${++statements}`, text, []);
  }

  async function fixture(): Promise<{ t: Tenant; projectId: string; key: { key: string; id: string } }> {
    const t = await tenant(stack, { email: `contain-${++seq}@example.test`, name: `Contain ${seq}` });
    const projectId = await t.project('live');
    const key = await t.apiKey(projectId, { scopes: ['relay:session'] });
    return { t, projectId, key };
  }

  const issue = (key: string) =>
    stack.app.inject({
      method: 'POST',
      url: '/api/v1/credentials',
      headers: { 'x-api-key': key },
      payload: {},
    });
  const active = async (token: string) => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/v1/credentials/introspect',
      headers: relayAuth,
      payload: { token },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ active: boolean }>().active;
  };
  const listedKey = async (t: Tenant, projectId: string, keyId: string) => {
    const res = await stack.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${projectId}/api-keys`,
      headers: t.auth,
    });
    expect(res.statusCode).toBe(200);
    return res
      .json<{ api_keys: { id: string; revoked_at: string | null }[] }>()
      .api_keys.find((k) => k.id === keyId);
  };

  it("the bulk route by api_key_id revokes the key's credentials, and the key (still active) obtains new ones", async () => {
    const { t, projectId, key } = await fixture();
    const before = [await issue(key.key), await issue(key.key)];
    for (const r of before) expect(r.statusCode, r.body).toBe(201);

    const res = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/credentials/revoke`,
      headers: t.auth,
      payload: { api_key_id: key.id },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ revoked: 2 });
    for (const r of before) expect(await active(r.json().token)).toBe(false);

    expect((await listedKey(t, projectId, key.id))?.revoked_at).toBeNull();
    const after = await issue(key.key);
    expect(after.statusCode, after.body).toBe(201);
    expect(await active(after.json().token)).toBe(true);
  });

  it('DELETE of a key: when admin cannot revoke the key after the issuer revoked its credentials, 503 says so; the retry completes', async () => {
    const { t, projectId, key } = await fixture();
    const issued = await issue(key.key);
    expect(issued.statusCode, issued.body).toBe(201);
    // Admin refuses to record the key's revocation (its audit event cannot be written): the
    // failure comes after the issuer's step.
    await ddl(
      `create or replace function gw_contain_refuse() returns trigger language plpgsql as $$
        begin if new.action = 'api_key.revoke' then raise exception 'refused by the test'; end if;
        return new; end $$`,
    );
    await ddl(
      'create trigger gw_contain_refuse before insert on admin.audit_events for each row execute function gw_contain_refuse()',
    );
    let failed: Awaited<ReturnType<typeof stack.app.inject>>;
    try {
      failed = await stack.app.inject({
        method: 'DELETE',
        url: `/admin/v1/projects/${projectId}/api-keys/${key.id}`,
        headers: t.auth,
      });
    } finally {
      await ddl('drop trigger gw_contain_refuse on admin.audit_events');
      await ddl('drop function gw_contain_refuse()');
    }
    expect(failed.statusCode, failed.body).toBe(503);
    expect(Number(failed.headers['retry-after'])).toBeGreaterThan(0);
    expect(failed.json()).toEqual({
      error:
        "the key's credentials were revoked (1 by this call) and it can obtain no new ones, but the key itself " +
        'could not be revoked yet; retry the call',
    });
    expect(failed.body).not.toMatch(/nothing was changed/);
    // Contained although the key is not revoked yet: its credential is inactive, it obtains none.
    expect(await active(issued.json().token)).toBe(false);
    expect((await listedKey(t, projectId, key.id))?.revoked_at).toBeNull();
    const refused = await issue(key.key);
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({ error: 'invalid or expired token' });

    const retry = await stack.app.inject({
      method: 'DELETE',
      url: `/admin/v1/projects/${projectId}/api-keys/${key.id}`,
      headers: t.auth,
    });
    expect(retry.statusCode, retry.body).toBe(200);
    expect(retry.json()).toMatchObject({
      id: key.id,
      revoked_credentials: 0,
      revoked_at: expect.any(String),
    });
    expect((await listedKey(t, projectId, key.id))?.revoked_at).toBe(retry.json().revoked_at);
  });

  it("DELETE of a key that is not the project's is 404 and records nothing at the issuer", async () => {
    const a = await fixture();
    const b = await fixture();
    for (const [project, keyId] of [
      [a.projectId, b.key.id],
      [a.projectId, 'key_00000000000000000000'],
      [b.projectId, b.key.id],
    ] as const) {
      const res = await stack.app.inject({
        method: 'DELETE',
        url: `/admin/v1/projects/${project}/api-keys/${keyId}`,
        headers: a.t.auth,
      });
      expect(res.statusCode, `${project} ${keyId}`).toBe(404);
      expect(Object.keys(res.json())).toEqual(['error']);
    }
    // The other tenant's key still obtains credentials: the issuer did not record it as revoked.
    expect((await issue(b.key.key)).statusCode).toBe(201);
  });

  it('answers 400 for impossible dates and malformed filters, never 500', async () => {
    const { t, projectId } = await fixture();
    for (const issuedBefore of [
      '2026-02-31T00:00:00Z',
      '2026-02-29T12:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T23:60:00Z',
      '2026-01-01T00:00:00+24:00',
      '2026-13-01T00:00:00Z',
    ]) {
      const res = await stack.app.inject({
        method: 'POST',
        url: `/admin/v1/projects/${projectId}/credentials/revoke`,
        headers: t.auth,
        payload: { issued_before: issuedBefore },
      });
      expect(res.statusCode, issuedBefore).toBe(400);
      expect(res.json(), issuedBefore).toEqual({ error: 'issued_before must be an RFC 3339 date-time' });
    }
    // A real date with an offset is taken (nothing to revoke).
    const ok = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/credentials/revoke`,
      headers: t.auth,
      payload: { issued_before: '2024-02-29T23:30:00-01:30' },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toEqual({ revoked: 0 });

    const base = `/admin/v1/projects/${projectId}/credentials`;
    const huge = Buffer.from(JSON.stringify([Number.MAX_SAFE_INTEGER, `crd_${'0'.repeat(20)}`])).toString(
      'base64url',
    );
    for (const query of [
      'api_key_id=%00',
      `api_key_id=key_%00${'0'.repeat(19)}`,
      `api_key_id=${projectId}`,
      `cursor=${huge}`,
    ]) {
      const res = await stack.app.inject({ method: 'GET', url: `${base}?${query}`, headers: t.auth });
      expect(res.statusCode, `${query}: ${res.body}`).toBe(400);
      expect(Object.keys(res.json()), query).toEqual(['error']);
    }
    const none = await stack.app.inject({
      method: 'GET',
      url: `${base}?api_key_id=key_00000000000000000000`,
      headers: t.auth,
    });
    expect(none.statusCode).toBe(200);
    expect(none.json()).toEqual({ credentials: [], next_cursor: null });
  });

  it('answers 400 for an impossible since/until on the audit route', async () => {
    const { t } = await fixture();
    for (const [query, error] of [
      ['since=2026-02-31T00:00:00Z', 'since must be an RFC 3339 date-time, e.g. 2026-11-25T12:00:00Z'],
      ['until=2026-06-31T10:00:00%2B02:00', 'until must be an RFC 3339 date-time, e.g. 2026-11-25T12:00:00Z'],
    ]) {
      const res = await stack.app.inject({
        method: 'GET',
        url: `/admin/v1/audit-events?${query}`,
        headers: t.auth,
      });
      expect(res.statusCode, query).toBe(400);
      expect(res.json()).toEqual({ error });
    }
  });
});
