/**
 * Containment of a leaked API key (issue 17 item 2; docs/credentials.md, "Containment"):
 * billing, admin, two issuers and two gateways as separate processes on PostgreSQL and Redis.
 * Revoking an API key revokes its live credentials in the same call; the bulk route revokes by
 * key and/or issue time and sets the project's watermark, which @relayplane/verifier applies.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { createVerifier } from '@relayplane/verifier';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';

const OWNER = { email: 'ops@example.test', password: 'containment password' };
const CAP = 60;
const LEAKED = 50;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Reads `read` every `everyMs` until `done` holds of what it answered; answers that value and
 * the milliseconds it took. Unlike support's `waitFor`, an error in `read` (a failed assertion:
 * a wrong status) fails at once with its own message, and a timeout names the last value seen.
 */
async function until<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs: number,
  what: string,
  everyMs = 50,
): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  for (;;) {
    const value = await read();
    const ms = performance.now() - start;
    if (done(value)) return { value, ms: Math.round(ms) };
    if (ms > timeoutMs) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value).slice(0, 400)}`,
      );
    }
    await sleep(everyMs);
  }
}

/** The `iat` (seconds) of a credential's token. */
const iatOf = (token: string): number =>
  JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')).iat;

/** Polls the clock (which the issuers share) until the second after `iat` has begun. */
async function pastSecondOf(iat: number): Promise<void> {
  await until(
    async () => Date.now(),
    (now) => now >= (iat + 1) * 1000,
    2_000,
    `the second after iat ${iat}`,
    5,
  );
}

describe('containment of a leaked API key across two gateways and two issuers', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let gateways: [Api, Api];
  let tenantCounter = 0;
  let relayAuth: { authorization: string };
  let relayToken: string;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_contain');
    redis = createTestRedis('e2e_contain');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(
      plans,
      `plans:\n  free:\n    limits: { max_concurrent_connections: ${CAP}, max_api_keys: 5, max_issuance_per_second_per_key: 1000 }\n`,
    );
    system = await startDistributed({
      label: 'contain',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 5).toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 2, gateway: 2 },
      extraEnv: { RELAYPLANE_PLANS_FILE: plans },
    });
    gateways = (await Promise.all(system.baseUrls.map((u) => Api.connect(u)))) as [Api, Api];
    const [a, b] = gateways;
    const ownerLogin = await a.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const relay = await a.request('POST', '/admin/v1/relays', {
      headers: { authorization: `Bearer ${ownerLogin.body.token}` },
      body: { region: 'eu-west', host: 'relay.contain.example', port: 4433 },
    });
    expect(relay.status).toBe(201);
    relayToken = relay.body.token;
    relayAuth = { authorization: `Bearer ${relayToken}` };
    expect(
      (await b.request('POST', '/v1/relays/heartbeat', { headers: relayAuth, body: { load: 0.1 } })).status,
    ).toBe(200);
  }, 180_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  /** A fresh tenant on the free plan with a project and `keys` API keys. */
  async function tenant(keys = 1) {
    const [a] = gateways;
    const n = ++tenantCounter;
    const login = { email: `c${n}@example.test`, password: 'tenant password 123' };
    expect(
      (await a.request('POST', '/admin/v1/auth/signup', { body: { ...login, tenant_name: `C${n}` } })).status,
    ).toBe(201);
    const session = await a.request('POST', '/admin/v1/auth/login', { body: login });
    const auth = { authorization: `Bearer ${session.body.token}` };
    const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    const apiKeys: { key: string; id: string }[] = [];
    for (let i = 0; i < keys; i++) {
      const key = await a.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
        headers: auth,
        body: { scopes: ['relay:session'] },
      });
      expect(key.status).toBe(201);
      apiKeys.push({ key: key.body.key, id: key.body.api_key.id });
    }
    return { auth, projectId: project.body.id as string, apiKeys };
  }

  const issue = (gw: Api, key: string) =>
    gw.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body: {} });
  const assignment = (gw: Api, token: string) =>
    gw.request('GET', '/v1/relays/assignment', { headers: { authorization: `Bearer ${token}` } });
  const introspect = (gw: Api, token: string) =>
    gw.request('POST', '/v1/credentials/introspect', { headers: relayAuth, body: { token } });

  /** The tenant's audit events of `action`, waiting up to 2 s for `count` of them. */
  async function auditEvents(auth: { authorization: string }, action: string, count: number) {
    const { value: events, ms } = await until(
      async () => {
        const res = await gateways[1].request('GET', `/admin/v1/audit-events?action=${action}`, {
          headers: auth,
        });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body.events as Record<string, unknown>[];
      },
      (listed) => listed.length >= count,
      2_000,
      `${count} ${action} event(s)`,
    );
    console.log(`${action} listed ${ms} ms after the call`);
    return events;
  }

  /** The feed's position now (read to its end). */
  async function feedEnd(): Promise<number> {
    let cursor = 0;
    for (;;) {
      const page = await gateways[0].request(
        'GET',
        `/v1/credentials/revocations?cursor=${cursor}&limit=1000`,
        {
          headers: relayAuth,
        },
      );
      if (page.body.next_cursor === cursor) return cursor;
      cursor = page.body.next_cursor;
    }
  }

  it(`revoking an API key with ${LEAKED} live credentials: all refused on both gateways within 1 s, inactive, in the feed, slots free`, async () => {
    const [a, b] = gateways;
    const t = await tenant(2);
    const [leaked, other] = t.apiKeys as [{ key: string; id: string }, { key: string; id: string }];
    const issued = await Promise.all(
      Array.from({ length: LEAKED }, (_, i) => issue(gateways[i % 2] as Api, leaked.key)),
    );
    expect(issued.map((r) => r.status)).toEqual(Array(LEAKED).fill(201));
    const kept = await issue(b, other.key);
    expect(kept.status).toBe(201);
    for (const gw of gateways) expect((await assignment(gw, issued[0]?.body.token)).status).toBe(200);
    const cursor = await feedEnd();

    const sent = performance.now();
    const revoked = await a.request('DELETE', `/admin/v1/projects/${t.projectId}/api-keys/${leaked.id}`, {
      headers: t.auth,
    });
    const answered = performance.now();
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({
      id: leaked.id,
      project_id: t.projectId,
      revoked_credentials: LEAKED,
    });
    expect(revoked.body.revoked_at).toEqual(expect.any(String));

    // Every credential answers 401 at assignment on both gateways. Timed to the start of the
    // round of 100 assignments that saw them all refused (the round itself takes a while here).
    // Before the refusal a credential may still answer 200; anything else fails at once.
    let roundStarted = answered;
    const { ms: refusedWithin } = await until(
      async () => {
        roundStarted = performance.now();
        const answers = await Promise.all(
          issued.flatMap((r) => gateways.map((gw) => assignment(gw, r.body.token))),
        );
        for (const x of answers) {
          if (x.status === 401) expect(x.body).toEqual({ error: 'invalid or expired token' });
          else expect(x.status, JSON.stringify(x.body)).toBe(200);
        }
        return answers.map((x) => x.status);
      },
      (statuses) => statuses.every((status) => status === 401),
      1_000,
      'every credential of the revoked key to be refused on both gateways',
      10,
    );
    const took = roundStarted - answered;
    console.log(
      `API key revoke answered in ${Math.round(answered - sent)} ms; a round of ${LEAKED * 2} assignments ` +
        `started ${Math.round(took)} ms after it saw every one refused (${refusedWithin} ms with the round)`,
    );
    expect(took).toBeLessThan(1_000);

    for (const r of issued) {
      const gw = gateways[issued.indexOf(r) % 2] as Api;
      expect((await introspect(gw, r.body.token)).body).toEqual({ active: false });
    }
    expect((await introspect(a, kept.body.token)).body.active).toBe(true);
    expect((await assignment(a, kept.body.token)).status).toBe(200);

    const feed = await b.request('GET', `/v1/credentials/revocations?cursor=${cursor}&limit=1000`, {
      headers: relayAuth,
    });
    expect(feed.body.revocations.map((r: { jti: string }) => r.jti).sort()).toEqual(
      issued.map((r) => r.body.jti).sort(),
    );

    // The key itself is refused, and its credentials' slots are free: the other key fills the cap.
    for (const gw of gateways) expect((await issue(gw, leaked.key)).status).toBe(401);
    const refill = await Promise.all(
      Array.from({ length: CAP - 1 }, (_, i) => issue(gateways[i % 2] as Api, other.key)),
    );
    expect(refill.map((r) => r.status)).toEqual(Array(CAP - 1).fill(201));
    const over = await issue(a, other.key);
    expect(over.status).toBe(402);

    // Revoking again: idempotent, nothing more revoked.
    const again = await b.request('DELETE', `/admin/v1/projects/${t.projectId}/api-keys/${leaked.id}`, {
      headers: t.auth,
    });
    expect(again.status).toBe(200);
    expect(again.body.revoked_credentials).toBe(0);
    expect(again.body.revoked_at).toBe(revoked.body.revoked_at);

    // Audited through the issuer's outbox: one event per call, with the caller and no token.
    const events = await auditEvents(t.auth, 'credentials.bulk_revoke', 2);
    expect(events).toHaveLength(2);
    const first = events.find((e) => (e.details as { revoked: number }).revoked === LEAKED);
    expect(first).toMatchObject({
      action: 'credentials.bulk_revoke',
      actor: { type: 'user' },
      target: { type: 'project', id: t.projectId },
      outcome: 'success',
      details: { api_key_id: leaked.id, issued_before: null, revoked: LEAKED },
    });
    expect(first?.ip).toEqual(expect.any(String));
    const text = JSON.stringify(events);
    for (const r of issued) expect(text).not.toContain(r.body.token);
    expect(text).not.toContain(leaked.key);
  }, 120_000);

  it('the bulk route with issued_before: older credentials revoked, and @relayplane/verifier applies the watermark even without their jti entries', async () => {
    const [a, b] = gateways;
    const t = await tenant(1);
    const key = t.apiKeys[0] as { key: string; id: string };
    const before = await Promise.all([issue(a, key.key), issue(b, key.key), issue(a, key.key)]);
    for (const r of before) expect(r.status).toBe(201);
    // The cut: the start of the second after their latest iat (so it covers them), once that second
    // has begun; a credential issued from then on has a later iat, so it is not covered.
    const lastIat = Math.max(...before.map((r) => iatOf(r.body.token)));
    await pastSecondOf(lastIat);
    const cut = new Date((lastIat + 1) * 1000);
    const after = await issue(b, key.key);
    expect(after.status).toBe(201);
    expect(iatOf(after.body.token)).toBeGreaterThanOrEqual(lastIat + 1);

    const verifier = createVerifier({ baseUrl: b.baseUrl, relayToken, revocationWaitSeconds: 25 });
    try {
      await verifier.ready;
      for (const r of [...before, after]) await verifier.verify(r.body.token);

      const res = await a.request('POST', `/admin/v1/projects/${t.projectId}/credentials/revoke`, {
        headers: t.auth,
        body: { issued_before: cut.toISOString() },
      });
      const answered = Date.now();
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ revoked: 3 });
      const { ms: learnt } = await until(
        async () => before.filter((r) => !verifier.isRevoked(r.body.jti)).map((r) => r.body.jti),
        (unknown) => unknown.length === 0,
        1_000,
        'the verifier to learn the bulk revocation',
        5,
      );
      console.log(
        `bulk revocation known to the verifier ${learnt} ms (${Date.now() - answered} ms) after the call`,
      );
      for (const r of before) {
        await expect(verifier.verify(r.body.token)).rejects.toMatchObject({ code: 'revoked' });
        expect((await assignment(b, r.body.token)).status).toBe(401);
        expect((await introspect(a, r.body.token)).body).toEqual({ active: false });
      }
      expect((await verifier.verify(after.body.token)).jti).toBe(after.body.jti);
      expect((await introspect(a, after.body.token)).body.active).toBe(true);

      const feed = await b.request('GET', '/v1/credentials/revocations?cursor=0&limit=1000', {
        headers: relayAuth,
      });
      const mark = feed.body.watermarks.find((w: { project_id: string }) => w.project_id === t.projectId);
      expect(mark).toEqual({
        project_id: t.projectId,
        issued_before: new Date(Math.ceil(cut.getTime() / 1000) * 1000).toISOString(),
      });
      const [event] = await auditEvents(t.auth, 'credentials.bulk_revoke', 1);
      expect(event).toMatchObject({
        target: { type: 'project', id: t.projectId },
        details: { api_key_id: null, issued_before: mark.issued_before, revoked: 3 },
      });
    } finally {
      await verifier.close();
    }

    // A verifier that missed their jti entries (deleted from the feed here) still refuses them
    // by the watermark, and still accepts the credential issued after it.
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const deleted = await client.query('delete from issuer.revocations where jti = any($1)', [
        before.map((r) => r.body.jti),
      ]);
      expect(deleted.rowCount).toBe(3);
    } finally {
      await client.end();
    }
    const late = createVerifier({ baseUrl: a.baseUrl, relayToken });
    try {
      await late.ready;
      for (const r of before) {
        expect(late.isRevoked(r.body.jti)).toBe(false);
        await expect(late.verify(r.body.token)).rejects.toMatchObject({ code: 'revoked' });
      }
      expect((await late.verify(after.body.token)).jti).toBe(after.body.jti);
    } finally {
      await late.close();
    }
  }, 60_000);

  it('lists credentials newest first, filtered by key and activity, page by page; never a token', async () => {
    const [a, b] = gateways;
    const t = await tenant(2);
    const [k1, k2] = t.apiKeys as [{ key: string; id: string }, { key: string; id: string }];
    const jtis: { jti: string; key: string }[] = [];
    for (let i = 0; i < 5; i++) {
      const k = i % 2 ? k2 : k1;
      const r = await issue(gateways[i % 2] as Api, k.key);
      expect(r.status).toBe(201);
      jtis.push({ jti: r.body.jti, key: k.id });
      await pastSecondOf(iatOf(r.body.token)); // distinct issued_at seconds: a fixed order to compare with
    }
    expect(
      (await a.request('POST', `/admin/v1/credentials/${jtis[0]?.jti}/revoke`, { headers: t.auth })).status,
    ).toBe(200);
    const base = `/admin/v1/projects/${t.projectId}/credentials`;

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { status: number; body: { credentials: { jti: string }[]; next_cursor: string | null } } =
        await b.request('GET', `${base}?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, {
          headers: t.auth,
        });
      expect(page.status).toBe(200);
      seen.push(...page.body.credentials.map((c) => c.jti));
      cursor = page.body.next_cursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(jtis.map((j) => j.jti).reverse());

    const all = await a.request('GET', base, { headers: t.auth });
    expect(all.body.next_cursor).toBeNull();
    const first = all.body.credentials.at(-1);
    expect(Object.keys(first).sort()).toEqual(['api_key_id', 'expires_at', 'issued_at', 'jti', 'revoked_at']);
    expect(first).toMatchObject({ jti: jtis[0]?.jti, api_key_id: k1.id, revoked_at: expect.any(String) });
    expect(all.body.credentials[0].revoked_at).toBeNull();

    const byKey = await a.request('GET', `${base}?api_key_id=${k2.id}`, { headers: t.auth });
    expect(byKey.body.credentials.map((c: { jti: string }) => c.jti)).toEqual(
      jtis
        .filter((j) => j.key === k2.id)
        .map((j) => j.jti)
        .reverse(),
    );
    const live = await a.request('GET', `${base}?active=true&api_key_id=${k1.id}`, { headers: t.auth });
    expect(live.body.credentials.map((c: { jti: string }) => c.jti)).toEqual(
      jtis
        .filter((j, i) => j.key === k1.id && i !== 0)
        .map((j) => j.jti)
        .reverse(),
    );

    for (const query of ['limit=0', 'limit=201', 'active=yes', 'cursor=bm90LWEtY3Vyc29y', 'color=red']) {
      const bad = await a.request('GET', `${base}?${query}`, { headers: t.auth });
      expect(bad.status, query).toBe(400);
      expect(Object.keys(bad.body), query).toEqual(['error']);
    }
  }, 60_000);

  it("the bulk route by api_key_id revokes the key's credentials on both gateways and leaves the key issuing", async () => {
    const [a, b] = gateways;
    const t = await tenant(1);
    const key = t.apiKeys[0] as { key: string; id: string };
    const before = await Promise.all([issue(a, key.key), issue(b, key.key)]);
    for (const r of before) expect(r.status).toBe(201);
    const res = await b.request('POST', `/admin/v1/projects/${t.projectId}/credentials/revoke`, {
      headers: t.auth,
      body: { api_key_id: key.id },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ revoked: 2 });
    for (const r of before) {
      for (const gw of gateways) expect((await assignment(gw, r.body.token)).status).toBe(401);
    }
    // The key was not revoked: still active in admin, and it obtains credentials on both gateways.
    const keys = await a.request('GET', `/admin/v1/projects/${t.projectId}/api-keys`, { headers: t.auth });
    expect(keys.body.api_keys.find((k: { id: string }) => k.id === key.id)?.revoked_at).toBeNull();
    for (const gw of gateways) {
      const fresh = await issue(gw, key.key);
      expect(fresh.status).toBe(201);
      expect((await assignment(gw === a ? b : a, fresh.body.token)).status).toBe(200);
    }
  }, 60_000);

  it('answers 400 and 404 with {error} on the bulk route, and 404 for another tenant', async () => {
    const [a] = gateways;
    const t = await tenant(1);
    const other = await tenant(1);
    const url = (project: string) => `/admin/v1/projects/${project}/credentials/revoke`;
    const cases: [string, { status: number; body: { error: string } }, number, RegExp][] = [
      [
        'empty body',
        await a.request('POST', url(t.projectId), { headers: t.auth, body: {} }),
        400,
        /api_key_id, issued_before or both/,
      ],
      [
        'not RFC 3339',
        await a.request('POST', url(t.projectId), { headers: t.auth, body: { issued_before: 'yesterday' } }),
        400,
        /RFC 3339/,
      ],
      [
        'date only',
        await a.request('POST', url(t.projectId), { headers: t.auth, body: { issued_before: '2026-01-01' } }),
        400,
        /RFC 3339/,
      ],
      [
        'impossible date',
        await a.request('POST', url(t.projectId), {
          headers: t.auth,
          body: { issued_before: '2026-02-31T00:00:00Z' },
        }),
        400,
        /RFC 3339/,
      ],
      [
        'future',
        await a.request('POST', url(t.projectId), {
          headers: t.auth,
          body: { issued_before: new Date(Date.now() + 3_600_000).toISOString() },
        }),
        400,
        /future/,
      ],
      [
        'unknown field',
        await a.request('POST', url(t.projectId), { headers: t.auth, body: { jti: 'x' } }),
        400,
        /./,
      ],
      [
        'unknown key',
        await a.request('POST', url(t.projectId), {
          headers: t.auth,
          body: { api_key_id: 'key_doesnotexist0000000000' },
        }),
        404,
        /not found/,
      ],
      [
        "another project's key",
        await a.request('POST', url(t.projectId), {
          headers: t.auth,
          body: { api_key_id: other.apiKeys[0]?.id },
        }),
        404,
        /not found/,
      ],
      [
        "another tenant's project",
        await a.request('POST', url(other.projectId), {
          headers: t.auth,
          body: { issued_before: new Date().toISOString() },
        }),
        404,
        /not found/,
      ],
      [
        "another tenant's project (list)",
        await a.request('GET', `/admin/v1/projects/${other.projectId}/credentials`, { headers: t.auth }),
        404,
        /not found/,
      ],
      [
        'no session',
        await a.request('POST', url(t.projectId), { body: { issued_before: new Date().toISOString() } }),
        401,
        /./,
      ],
    ];
    for (const [what, res, status, message] of cases) {
      expect(res.status, what).toBe(status);
      expect(Object.keys(res.body), what).toEqual(['error']);
      expect(res.body.error, what).toMatch(message);
    }
    // The other tenant's key still works: nothing was revoked by the refused calls.
    expect((await issue(a, other.apiKeys[0]?.key as string)).status).toBe(201);
  }, 60_000);

  it('checked every response against the OpenAPI document', () => {
    expect(gateways.reduce((n, g) => n + g.checked, 0)).toBeGreaterThan(100);
  });
});
