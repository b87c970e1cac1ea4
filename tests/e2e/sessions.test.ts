/**
 * Sessions a user controls, end to end: the four apps as processes with two gateways. A session
 * ended through one gateway answers 401 on both within 1 s; revoke-others and a password change
 * end the rest; each change leaves exactly one audit event with the right actor, target,
 * outcome and IP. Every response is checked against the OpenAPI document (support/api.ts).
 */
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';

const OWNER = { email: 'sessions-owner@example.test', password: 'sessions e2e password 1' };
const NEW_PASSWORD = 'sessions e2e password 2';
const INVALID_TOKEN = { error: 'invalid or expired token' };

describe('sessions a user controls, across two gateways', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed | undefined;
  let gateways: Api[] = [];
  let first: Api;
  let second: Api;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_sessions');
    redis = createTestRedis('e2e_sessions');
    system = await startDistributed({
      label: 'sessions',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 5).toString('base64'),
      bootstrap: OWNER,
      replicas: { gateway: 2 },
    });
    gateways = await Promise.all(system.baseUrls.map((url) => Api.connect(url)));
    [first, second] = gateways as [Api, Api];
  }, 120_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(codes.every((c) => c === 0)).toBe(true);
  });

  /** A login through `api` from a client naming itself `userAgent`. */
  async function login(api: Api, userAgent: string, password = OWNER.password) {
    const res = await api.request('POST', '/admin/v1/auth/login', {
      body: { email: OWNER.email, password },
      headers: { 'user-agent': userAgent },
    });
    expect(res.status).toBe(200);
    return {
      id: res.body.session.id as string,
      auth: { authorization: `Bearer ${res.body.token}`, 'user-agent': userAgent },
    };
  }

  /** How long until `auth` answers 401 on both gateways (fails past 1 s). */
  async function refusedOnBothWithin1s(auth: Record<string, string>): Promise<number> {
    const started = performance.now();
    for (const api of gateways) {
      for (;;) {
        const res = await api.request('GET', '/admin/v1/auth/session', { headers: auth });
        if (res.status === 401) {
          expect(res.body).toEqual(INVALID_TOKEN);
          break;
        }
        expect(res.status).toBe(200);
        expect(performance.now() - started).toBeLessThan(1_000);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    return performance.now() - started;
  }

  /** The audit events of `action` naming `targetId`, as the tenant's owner reads them. */
  async function events(auth: Record<string, string>, action: string, targetId: string) {
    const query = new URLSearchParams({ action, target_id: targetId }).toString();
    const res = await first.request('GET', `/admin/v1/audit-events?${query}`, { headers: auth });
    expect(res.status).toBe(200);
    return res.body.events as {
      actor: { type: string; id: string };
      target: { type: string; id: string };
      outcome: string;
      ip: string;
      user_agent: string;
      details: Record<string, unknown>;
    }[];
  }

  it('lists the sessions with where they came from, through either gateway', async () => {
    const laptop = await login(first, 'e2e-laptop/1.0');
    const phone = await login(second, 'e2e-phone/1.0');
    for (const api of gateways) {
      const res = await api.request('GET', '/admin/v1/auth/sessions', { headers: laptop.auth });
      expect(res.status).toBe(200);
      const byId = new Map(res.body.sessions.map((s: { id: string }) => [s.id, s]));
      expect(byId.get(laptop.id)).toMatchObject({
        kind: 'bearer',
        ip: '127.0.0.1',
        user_agent: 'e2e-laptop/1.0',
        current: true,
      });
      expect(byId.get(phone.id)).toMatchObject({
        kind: 'bearer',
        user_agent: 'e2e-phone/1.0',
        current: false,
      });
    }
  });

  it('a session ended through one gateway answers 401 on both within 1 s, with one audit event', async () => {
    const me = await login(first, 'e2e-me/1.0');
    const victim = await login(second, 'e2e-victim/1.0');
    expect((await second.request('GET', '/admin/v1/auth/session', { headers: victim.auth })).status).toBe(
      200,
    );
    const res = await first.request('DELETE', `/admin/v1/auth/sessions/${victim.id}`, { headers: me.auth });
    expect(res.status).toBe(204);
    expect(await refusedOnBothWithin1s(victim.auth)).toBeLessThan(1_000);
    const user = (await first.request('GET', '/admin/v1/auth/session', { headers: me.auth })).body.user.id;
    const recorded = await events(me.auth, 'session.revoke', victim.id);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      actor: { type: 'user', id: user },
      target: { type: 'session', id: victim.id },
      outcome: 'success',
      ip: '127.0.0.1',
      user_agent: 'e2e-me/1.0',
      details: { scope: 'one', current: false },
    });
  });

  it('revoke-others and a password change end every other session on both gateways', async () => {
    const me = await login(second, 'e2e-keeper/1.0');
    const others = [await login(first, 'e2e-a/1.0'), await login(second, 'e2e-b/1.0')];
    const revoked = await first.request('POST', '/admin/v1/auth/sessions/revoke-others', {
      headers: me.auth,
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked).toBeGreaterThanOrEqual(2);
    for (const o of others) expect(await refusedOnBothWithin1s(o.auth)).toBeLessThan(1_000);

    const later = [await login(first, 'e2e-c/1.0'), await login(second, 'e2e-d/1.0')];
    const changed = await second.request('POST', '/admin/v1/auth/password', {
      headers: me.auth,
      body: { current_password: OWNER.password, new_password: NEW_PASSWORD },
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toEqual({ sessions: 2, device_grants: 0, identity_tokens: 0 });
    for (const o of later) expect(await refusedOnBothWithin1s(o.auth)).toBeLessThan(1_000);
    for (const api of gateways) {
      expect((await api.request('GET', '/admin/v1/auth/session', { headers: me.auth })).status).toBe(200);
    }
    const user = (await first.request('GET', '/admin/v1/auth/session', { headers: me.auth })).body.user.id;
    const recorded = await events(me.auth, 'user.password_change', user);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      actor: { type: 'user', id: user },
      target: { type: 'user', id: user },
      outcome: 'success',
      ip: '127.0.0.1',
      details: { revoked_sessions: 2, kept_session_id: me.id },
    });
    expect(JSON.stringify(recorded)).not.toContain(NEW_PASSWORD);
    const old = await first.request('POST', '/admin/v1/auth/login', {
      body: { email: OWNER.email, password: OWNER.password },
    });
    expect(old.status).toBe(401);
    await login(second, 'e2e-new/1.0', NEW_PASSWORD);
  });
});
