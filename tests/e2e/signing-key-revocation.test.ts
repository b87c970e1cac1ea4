/**
 * A compromised signing key revoked under load (issue 19 item 5; docs/credentials.md, "Revoking
 * a signing key"): billing, admin, two issuers and two gateways as separate processes on
 * PostgreSQL and Redis. While credentials are issued through both gateways without pause, a
 * platform administrator revokes the active key: within 1 s it is gone from both gateways' JWKS,
 * the credentials it signed answer 401 at assignment and are inactive at introspection, every
 * credential requested after the revocation answered is signed by another key and verifies, a
 * @relayplane/verifier following the feed refuses the old key's credentials within 1 s, and no
 * request fails.
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
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';

const OWNER = { email: 'ops@example.test', password: 'revocation password' };
/** Concurrent issuance loops (each alternating between the two gateways). */
const WORKERS = 6;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const kidOf = (token: string) => String(decodeProtectedHeader(token).kid);

/** Reads `read` every `everyMs` until `done` holds; answers the value and the ms it took. */
async function until<T>(
  read: () => Promise<T> | T,
  done: (value: T) => boolean,
  timeoutMs: number,
  what: string,
  everyMs = 10,
): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  for (;;) {
    const value = await read();
    const ms = performance.now() - start;
    if (done(value)) return { value, ms: Math.round(ms) };
    if (ms > timeoutMs) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(value).slice(0, 300)}`,
      );
    }
    await sleep(everyMs);
  }
}

interface Issued {
  status: number;
  /** performance.now() when the request was sent and when it was answered. */
  sentAt: number;
  answeredAt: number;
  token?: string;
  jti?: string;
  gateway: number;
}

describe('revoking a compromised signing key under load, two issuers and two gateways', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let gateways: [Api, Api];
  let owner: { authorization: string };
  let relayAuth: { authorization: string };
  let apiKey: string;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_key_revoke');
    redis = createTestRedis('e2e_key_revoke');
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(
      plans,
      'plans:\n  free:\n    limits: { max_concurrent_connections: 100000, max_api_keys: 5, max_issuance_per_second_per_key: 100000 }\n',
    );
    system = await startDistributed({
      label: 'keyrevoke',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 9).toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 2, gateway: 2 },
      extraEnv: { RELAYPLANE_PLANS_FILE: plans },
    });
    gateways = (await Promise.all(system.baseUrls.map((u) => Api.connect(u)))) as [Api, Api];
    const [a, b] = gateways;
    const login = await a.request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
    owner = { authorization: `Bearer ${login.body.token}` };
    const relay = await a.request('POST', '/admin/v1/relays', {
      headers: owner,
      body: { region: 'eu-west', host: 'relay.keyrevoke.example', port: 4433 },
    });
    expect(relay.status).toBe(201);
    relayAuth = { authorization: `Bearer ${relay.body.token}` };
    expect(
      (await b.request('POST', '/v1/relays/heartbeat', { headers: relayAuth, body: { load: 0.1 } })).status,
    ).toBe(200);
    // A customer with a project and an API key.
    const customer = { email: 'customer@example.test', password: 'customer password 123' };
    expect(
      (await a.request('POST', '/admin/v1/auth/signup', { body: { ...customer, tenant_name: 'Customer' } }))
        .status,
    ).toBe(201);
    const session = await a.request('POST', '/admin/v1/auth/login', { body: customer });
    const auth = { authorization: `Bearer ${session.body.token}` };
    const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    const key = await a.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    apiKey = key.body.key;
  }, 180_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  const issue = (gw: Api) =>
    gw.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': apiKey }, body: {} });
  const jwksKids = async (gw: Api) =>
    ((await gw.request('GET', '/v1/credentials/jwks')).body.keys as { kid: string }[]).map((k) => k.kid);

  it('the key leaves both JWKS within 1 s, its credentials answer 401, new ones use another key, the verifier refuses it within 1 s, 0 failures', async () => {
    const [a, b] = gateways;
    const keys = (await a.request('GET', '/admin/v1/signing-keys?limit=200', { headers: owner })).body
      .keys as {
      kid: string;
      state: string;
    }[];
    const compromised = keys.find((k) => k.state === 'active')?.kid ?? '';
    const next = keys.find((k) => k.state === 'next')?.kid ?? '';
    expect(compromised).not.toBe('');
    for (const gw of gateways) expect(await jwksKids(gw)).toEqual([compromised, next]);

    const verifier = createVerifier({ baseUrl: b.baseUrl, relayToken: relayAuth.authorization.slice(7) });
    const issued: Issued[] = [];
    let stop = false;
    const loops: Promise<void>[] = [];
    try {
      await verifier.ready;
      // Steady issuance through both gateways, before, during and after the revocation.
      for (let w = 0; w < WORKERS; w++) {
        loops.push(
          (async () => {
            for (let i = w; !stop; i++) {
              const gateway = i % 2;
              const sentAt = performance.now();
              const res = await issue(gateways[gateway] as Api);
              issued.push({
                status: res.status,
                sentAt,
                answeredAt: performance.now(),
                token: res.body?.token,
                jti: res.body?.jti,
                gateway,
              });
            }
          })(),
        );
      }
      await until(
        () => issued.length,
        (n) => n >= 60,
        20_000,
        'issuance under way',
      );
      const early = issued.find((r) => r.token);
      if (!early?.token) throw new Error('no credential issued');
      expect(kidOf(early.token)).toBe(compromised);
      expect((await verifier.verify(early.token)).jti).toBe(early.jti);

      const sent = performance.now();
      const res = await a.request('POST', `/admin/v1/signing-keys/${compromised}/revoke`, { headers: owner });
      const answered = performance.now();
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({
        revoked: { kid: compromised, state: 'removed' },
        active: { kid: next, state: 'active' },
        already_revoked: false,
      });

      // Gone from both gateways' JWKS, and known to the verifier, within 1 s of the answer.
      const [jwksA, jwksB, learnt] = await Promise.all([
        until(
          () => jwksKids(a),
          (kids) => !kids.includes(compromised),
          1_000,
          'gateway a to drop the key',
        ),
        until(
          () => jwksKids(b),
          (kids) => !kids.includes(compromised),
          1_000,
          'gateway b to drop the key',
        ),
        until(
          () => verifier.isKeyRevoked(compromised),
          (known) => known,
          1_000,
          'the verifier to learn it',
          5,
        ),
      ]);
      console.log(
        `revoke answered in ${Math.round(answered - sent)} ms; then JWKS without the key: gateway a ${jwksA.ms} ms, gateway b ${jwksB.ms} ms; verifier knew ${learnt.ms} ms`,
      );
      for (const gw of gateways) expect((await jwksKids(gw))[0]).toBe(next);
      // Load goes on for another second.
      await sleep(1_000);
      stop = true;
      await Promise.all(loops);

      // Not one request failed.
      const statuses = new Map<number, number>();
      for (const r of issued) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      expect(Object.fromEntries(statuses)).toEqual({ 201: issued.length });
      const oldKey = issued.filter((r) => r.token && kidOf(r.token) === compromised);
      const requestedAfter = issued.filter((r) => r.sentAt > answered);
      const newKey = issued.filter((r) => r.token && kidOf(r.token) !== compromised);
      console.log(
        `${issued.length} credentials issued: ${oldKey.length} by the revoked key, ${newKey.length} by ${next}; ${requestedAfter.length} requested after the revocation answered`,
      );
      expect(oldKey.length).toBeGreaterThan(0);
      expect(requestedAfter.length).toBeGreaterThan(20);
      // Every credential requested after the revocation answered is signed by the new key.
      for (const r of requestedAfter) expect(kidOf(r.token ?? '')).toBe(next);

      // The revoked key's credentials: refused by the verifier, 401 at assignment and inactive on both gateways.
      for (const r of oldKey) {
        await expect(verifier.verify(r.token ?? '')).rejects.toMatchObject({ code: 'revoked' });
      }
      for (const r of oldKey.slice(0, 10)) {
        for (const gw of gateways) {
          const assigned = await gw.request('GET', '/v1/relays/assignment', {
            headers: { authorization: `Bearer ${r.token}` },
          });
          expect(assigned.status).toBe(401);
          expect(assigned.body).toEqual({ error: 'invalid or expired token' });
          const introspected = await gw.request('POST', '/v1/credentials/introspect', {
            headers: relayAuth,
            body: { token: r.token },
          });
          expect(introspected.body).toEqual({ active: false });
        }
      }
      // The new key's credentials verify: with the verifier, with jose against each gateway's JWKS, at assignment.
      const jwks = await Promise.all(gateways.map((gw) => gw.request('GET', '/v1/credentials/jwks')));
      for (const r of newKey.slice(-20)) {
        expect((await verifier.verify(r.token ?? '')).jti).toBe(r.jti);
        for (const set of jwks) {
          await jwtVerify(r.token ?? '', createLocalJWKSet(set.body), {
            algorithms: ['EdDSA'],
            issuer: 'relayplane',
            audience: 'relayplane-relay',
          });
        }
      }
      for (const gw of gateways) {
        const fresh = newKey.at(-1)?.token ?? '';
        expect(
          (
            await gw.request('GET', '/v1/relays/assignment', {
              headers: { authorization: `Bearer ${fresh}` },
            })
          ).status,
        ).toBe(200);
      }
      expect(verifier.metrics()).toMatchObject({ revokedKeys: 1, feedStale: false, failingClosed: false });

      // The feed names the key; the platform trail has the event with its caller.
      const feed = await b.request('GET', '/v1/credentials/revocations?cursor=0&limit=1000', {
        headers: relayAuth,
      });
      expect(feed.body.revoked_keys).toEqual([{ kid: compromised, revoked_at: res.body.revoked.revoked_at }]);
      const { value: events } = await until(
        async () =>
          (
            await b.request('GET', '/admin/v1/audit-events?tenant_id=platform&action=signing_key.revoke', {
              headers: owner,
            })
          ).body.events as Record<string, unknown>[],
        (listed) => listed.length >= 1,
        2_000,
        'the signing_key.revoke event',
        50,
      );
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        action: 'signing_key.revoke',
        target: { type: 'signing_key', id: compromised },
        outcome: 'success',
        details: { state: 'active', promoted_kid: next },
      });

      // A repeat: 200, already revoked, nothing changes.
      const again = await b.request('POST', `/admin/v1/signing-keys/${compromised}/revoke`, {
        headers: owner,
      });
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ already_revoked: true, active: { kid: next } });
    } finally {
      stop = true;
      await Promise.all(loops);
      await verifier.close();
    }
  }, 120_000);
});
