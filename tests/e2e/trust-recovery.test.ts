/**
 * Trust III, end to end (the four apps as processes on PostgreSQL and Redis): what a stolen
 * session can no longer keep once the victim changes the password or signs out everywhere, and
 * why address churn inside one IPv6 /64 cannot lock the owner out. Each attack is driven through
 * the public HTTP API as an attacker would; every response is checked against the OpenAPI
 * document (support/api.ts).
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

const OWNER = { email: 'trust3-owner@example.test', password: 'trust three password 1' };
const CLIENT_ID = 'relayplane-cli';
const JSON_HEADERS = { 'content-type': 'application/json' };

describe('Trust III: recovery from a stolen session, no lockout by address churn', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed | undefined;
  let api: Api;
  let password = OWNER.password;
  let seq = 0;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_trust3');
    redis = createTestRedis('e2e_trust3');
    system = await startDistributed({
      label: 'trust3',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 9).toString('base64'),
      bootstrap: OWNER,
      extraEnv: { ADMIN_DEVICE_POLL_INTERVAL_SECONDS: '1' },
      // The test plays many client addresses through X-Forwarded-For from loopback.
      appEnv: { gateway: { GATEWAY_TRUSTED_PROXIES: '127.0.0.1/32,::1/128' } },
    });
    api = await Api.connect(system.baseUrl);
  }, 120_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(codes.every((c) => c === 0)).toBe(true);
  });

  const from = (ip: string) => ({ 'x-forwarded-for': ip });

  async function login(ip: string, extra: Record<string, unknown> = {}) {
    const res = await api.request('POST', '/admin/v1/auth/login', {
      body: { email: OWNER.email, password, ...extra },
      headers: from(ip),
    });
    expect(res.status).toBe(200);
    return {
      token: res.body.token as string,
      deviceToken: res.body.device_token as string,
      auth: { authorization: `Bearer ${res.body.token}` },
    };
  }

  async function changePassword(auth: Record<string, string>, body: Record<string, unknown> = {}) {
    const next = `trust three password ${++seq + 1}`;
    const res = await api.request('POST', '/admin/v1/auth/password', {
      body: { current_password: password, new_password: next, ...body },
      headers: auth,
    });
    if (res.status === 200) password = next;
    return res;
  }

  /** A project with a bot, as the owner: where identity tokens are made. */
  async function botOf(auth: Record<string, string>) {
    const project = await api.request('POST', '/admin/v1/projects', {
      body: { name: `trust3-${++seq}` },
      headers: auth,
    });
    expect(project.status).toBe(201);
    const bot = await api.request('POST', `/admin/v1/projects/${project.body.id}/bots`, {
      body: { name: 'deployer' },
      headers: auth,
    });
    expect(bot.status).toBe(201);
    return { projectId: project.body.id as string, botId: bot.body.id as string };
  }

  async function identityToken(auth: Record<string, string>, bot: { projectId: string; botId: string }) {
    const res = await api.request('POST', `/v1/projects/${bot.projectId}/identities/${bot.botId}/tokens`, {
      body: { scopes: ['projects:read'] },
      headers: auth,
    });
    expect(res.status).toBe(201);
    return { authorization: `Bearer ${res.body.value}` };
  }

  async function startDevice() {
    const res = await api.request('POST', '/admin/v1/auth/device/code', {
      body: { client_id: CLIENT_ID },
      headers: from('192.0.2.50'),
    });
    expect(res.status).toBe(200);
    return { deviceCode: res.body.device_code as string, userCode: res.body.user_code as string };
  }

  const poll = (deviceCode: string) =>
    api.request('POST', '/admin/v1/auth/token', {
      body: {
        grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
        device_code: deviceCode,
        client_id: CLIENT_ID,
      },
      headers: JSON_HEADERS,
    });

  it('the device-flow attack: a grant approved by a stolen session is refused after the password change, and the identity tokens it made are revoked', async () => {
    const victim = await login('203.0.113.10');
    const stolen = await login('198.51.100.66');
    const bot = await botOf(victim.auth);
    // The attacker, with the stolen session: approves a device of theirs and does not poll yet,
    // and makes an identity token.
    const device = await startDevice();
    const approved = await api.request('POST', '/admin/v1/auth/device/approve', {
      body: { user_code: device.userCode, action: 'approve' },
      headers: stolen.auth,
    });
    expect(approved.status).toBe(200);
    const attackerIdentity = await identityToken(stolen.auth, bot);
    // The victim's own identity token, made under the session that changes the password: kept.
    const victimIdentity = await identityToken(victim.auth, bot);
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: attackerIdentity })).status).toBe(
      200,
    );

    const changed = await changePassword(victim.auth);
    expect(changed.status).toBe(200);
    expect(changed.body).toEqual({ sessions: 1, device_grants: 1, identity_tokens: 1 });

    // The stolen session, the poll, and the identity token: all refused.
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: stolen.auth })).status).toBe(401);
    const polled = await poll(device.deviceCode);
    expect(polled.status).toBe(400);
    expect(polled.body.error).toBe('access_denied');
    // Refused for good: a second poll does not mint a token either.
    expect((await poll(device.deviceCode)).body.error).toBe('access_denied');
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: attackerIdentity })).status).toBe(
      401,
    );
    // What the victim holds still works.
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: victim.auth })).status).toBe(200);
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: victimIdentity })).status).toBe(
      200,
    );
  });

  it('sign out everywhere ends an approved grant and the identity tokens of other sessions; keep_identity_tokens keeps them', async () => {
    const victim = await login('203.0.113.11');
    const stolen = await login('198.51.100.67');
    const bot = await botOf(victim.auth);
    const device = await startDevice();
    expect(
      (
        await api.request('POST', '/admin/v1/auth/device/approve', {
          body: { user_code: device.userCode, action: 'approve' },
          headers: stolen.auth,
        })
      ).status,
    ).toBe(200);
    const kept = await identityToken(stolen.auth, bot);
    const everywhere = await api.request('POST', '/admin/v1/auth/sessions/revoke-others', {
      body: { keep_identity_tokens: true },
      headers: victim.auth,
    });
    expect(everywhere.status).toBe(200);
    // The stolen session, and the earlier tests' sessions kept by their own changes.
    expect(everywhere.body).toMatchObject({ device_grants: 1, identity_tokens: 0 });
    expect(everywhere.body.sessions).toBeGreaterThanOrEqual(1);
    expect(everywhere.body.revoked).toBe(everywhere.body.sessions);
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: stolen.auth })).status).toBe(401);
    expect((await poll(device.deviceCode)).body.error).toBe('access_denied');
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: kept })).status).toBe(200);

    const again = await login('198.51.100.68');
    const lost = await identityToken(again.auth, bot);
    const second = await api.request('POST', '/admin/v1/auth/sessions/revoke-others', {
      headers: victim.auth,
    });
    expect(second.status).toBe(200);
    // The kept token and the new one, both created under other sessions (and any an earlier test left).
    expect(second.body).toMatchObject({ sessions: 1, device_grants: 0 });
    expect(second.body.identity_tokens).toBeGreaterThanOrEqual(2);
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: kept })).status).toBe(401);
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: lost })).status).toBe(401);
  });

  it('a grant whose approving session ended (logout) is refused when redeemed', async () => {
    const approver = await login('203.0.113.12');
    const device = await startDevice();
    await api.request('POST', '/admin/v1/auth/device/approve', {
      body: { user_code: device.userCode, action: 'approve' },
      headers: approver.auth,
    });
    expect((await api.request('POST', '/admin/v1/auth/logout', { headers: approver.auth })).status).toBe(204);
    const polled = await poll(device.deviceCode);
    expect(polled.status).toBe(400);
    expect(polled.body.error).toBe('access_denied');
  });

  it('the login race: logins with the old password racing a password change keep no session', async () => {
    const changer = await login('203.0.113.13');
    const old = password;
    const racers = Array.from({ length: 12 }, (_, i) =>
      api.request('POST', '/admin/v1/auth/login', {
        body: { email: OWNER.email, password: old },
        headers: from(`203.0.113.${100 + i}`),
      }),
    );
    const changed = changePassword(changer.auth);
    const [results, change] = await Promise.all([Promise.all(racers), changed]);
    expect(change.status).toBe(200);
    // Whichever way each raced, no login with the old password holds a live session now.
    for (const res of results) {
      expect([200, 401]).toContain(res.status);
      if (res.status !== 200) continue;
      const auth = { authorization: `Bearer ${res.body.token}` };
      expect((await api.request('GET', '/admin/v1/auth/session', { headers: auth })).status).toBe(401);
    }
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: changer.auth })).status).toBe(200);
  });

  it('100 wrong passwords from 100 addresses of one /64 leave the owner in: a known device at once, a new address in another /64 at once', async () => {
    const known = await login('2001:db8:77:1::1');
    const attempts: number[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await api.request('POST', '/admin/v1/auth/login', {
        body: { email: OWNER.email, password: 'a wrong guess at the password' },
        headers: from(`2001:db8:bad:1:${(i + 1).toString(16)}::${(i * 7 + 3).toString(16)}`),
      });
      attempts.push(res.status);
      if (res.status === 429) {
        const retryAfter = Number(res.headers.get('retry-after'));
        expect(retryAfter).toBeGreaterThan(0);
      }
    }
    // The /64 is one client: its tight limit (10 per account) stops it; the rest never reach a
    // password check.
    expect(attempts.filter((s) => s === 401)).toHaveLength(10);
    expect(attempts.filter((s) => s === 429)).toHaveLength(90);
    const atOnce = await api.request('POST', '/admin/v1/auth/login', {
      body: { email: OWNER.email, password, device_token: known.deviceToken },
      headers: from('2001:db8:77:2::9'),
    });
    expect(atOnce.status).toBe(200);
    const elsewhere = await api.request('POST', '/admin/v1/auth/login', {
      body: { email: OWNER.email, password },
      headers: from('2001:db8:cafe:1::1'),
    });
    expect(elsewhere.status).toBe(200);
    // The audit trail shows 10 wrong passwords (each an argon2 check), the refusals aggregated.
    const events = await api.request(
      'GET',
      `/admin/v1/audit-events?${new URLSearchParams({ action: 'session.login_failed', limit: '200' })}`,
      { headers: { authorization: `Bearer ${atOnce.body.token}` } },
    );
    expect(events.status).toBe(200);
    const fromTheBlock = (
      events.body.events as { ip: string | null; details: Record<string, unknown> }[]
    ).filter((e) => e.ip?.startsWith('2001:db8:bad:1:'));
    expect(fromTheBlock.filter((e) => e.details.reason === 'wrong_password')).toHaveLength(10);
    expect(fromTheBlock.filter((e) => e.details.reason === 'throttled').length).toBeGreaterThan(0);
  });
});
