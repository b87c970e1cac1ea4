/**
 * A second factor for people, end to end (issue 31; the four apps as processes): TOTP enrolment,
 * the two-step login with a code computed by a well-kept TOTP library (otpauth), a replayed code
 * refused, recovery codes used once, fresh codes for device approval, password change and
 * removal, and a tenant's `require_mfa` refusing a member without one everything but enrolling.
 * Every response is checked against the OpenAPI document (support/api.ts).
 */

import { auditSecretsIn } from '@relayplane/testing/audit';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { Secret, TOTP } from 'otpauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';

const OWNER = { email: 'mfa-owner@example.test', password: 'second factor password 1' };
const MEMBER = { email: 'mfa-member@example.test', password: 'second factor password 2' };
const CLIENT_ID = 'relayplane-cli';

describe('a second factor (TOTP) for people, four processes', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed | undefined;
  let api: Api;
  let totp: TOTP;
  let recoveryCodes: string[] = [];
  let owner: Record<string, string>;
  let ownerPassword = OWNER.password;
  /** The last time step whose code was used: codes are taken from later steps (the window allows +1). */
  let usedStep = 0;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_mfa');
    redis = createTestRedis('e2e_mfa');
    system = await startDistributed({
      label: 'mfa',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 11).toString('base64'),
      bootstrap: OWNER,
    });
    api = await Api.connect(system.baseUrl);
  }, 120_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(codes.every((c) => c === 0)).toBe(true);
  });

  /** A code no earlier request used: the current step's, else the next one's (accepted: ±1 step). */
  function freshCode(): string {
    const now = Math.floor(Date.now() / 30_000);
    const step = Math.max(now, usedStep + 1);
    if (step > now + 1) throw new Error('no unused TOTP step within the window: the test used too many');
    usedStep = step;
    const code = totp.generate({ timestamp: step * 30_000 });
    auditSecretsIn({ code });
    return code;
  }

  async function passwordStep(email: string, password: string) {
    return api.request('POST', '/admin/v1/auth/login', { body: { email, password } });
  }

  it('enrols: a secret and an otpauth:// URI, confirmed by a first code, ten recovery codes once', async () => {
    const login = await passwordStep(OWNER.email, OWNER.password);
    expect(login.status).toBe(200);
    owner = { authorization: `Bearer ${login.body.token}` };
    const started = await api.request('POST', '/admin/v1/auth/mfa/totp', { headers: owner });
    expect(started.status).toBe(200);
    expect(started.headers.get('cache-control')).toBe('no-store');
    expect(started.body.otpauth_uri).toMatch(/^otpauth:\/\/totp\/Relayplane:mfa-owner%40example\.test\?/);
    totp = new TOTP({
      secret: Secret.fromBase32(started.body.secret),
      algorithm: 'SHA1',
      digits: 6,
      period: 30,
    });
    // The library reads the same secret out of the URI.
    expect(new URL(started.body.otpauth_uri).searchParams.get('secret')).toBe(totp.secret.base32);

    const wrong = await api.request('POST', '/admin/v1/auth/mfa/totp/confirm', {
      headers: owner,
      body: { code: '000000' === totp.generate() ? '111111' : '000000' },
    });
    expect(wrong.status).toBe(400);
    const confirmed = await api.request('POST', '/admin/v1/auth/mfa/totp/confirm', {
      headers: owner,
      body: { code: freshCode() },
    });
    expect(confirmed.status).toBe(200);
    recoveryCodes = confirmed.body.recovery_codes;
    expect(recoveryCodes).toHaveLength(10);
    expect(new Set(recoveryCodes).size).toBe(10);
    const again = await api.request('POST', '/admin/v1/auth/mfa/totp', { headers: owner });
    expect(again.status).toBe(409);
    const status = await api.request('GET', '/admin/v1/auth/mfa', { headers: owner });
    expect(status.body).toMatchObject({
      totp_enabled: true,
      recovery_codes_left: 10,
      tenant_requires_mfa: false,
    });
  });

  it('logs in in two steps; the same code is refused the second time; a recovery code works once', async () => {
    const first = await passwordStep(OWNER.email, OWNER.password);
    expect(first.status).toBe(401);
    expect(first.body).toMatchObject({ mfa_required: true, error: expect.any(String) });
    expect(first.body.mfa_token).toMatch(/^rpm_/);
    expect(first.body.token).toBeUndefined();
    const code = freshCode();
    const second = await api.request('POST', '/admin/v1/auth/login/mfa', {
      body: { mfa_token: first.body.mfa_token, code },
    });
    expect(second.status).toBe(200);
    expect(second.body.token).toMatch(/^rpu_/);
    expect(
      (
        await api.request('GET', '/admin/v1/auth/session', {
          headers: { authorization: `Bearer ${second.body.token}` },
        })
      ).status,
    ).toBe(200);
    // The mfa_token is single use.
    const reused = await api.request('POST', '/admin/v1/auth/login/mfa', {
      body: { mfa_token: first.body.mfa_token, code },
    });
    expect(reused.status).toBe(401);
    // A replayed code on a fresh challenge: refused.
    const third = await passwordStep(OWNER.email, OWNER.password);
    const replay = await api.request('POST', '/admin/v1/auth/login/mfa', {
      body: { mfa_token: third.body.mfa_token, code },
    });
    expect(replay.status).toBe(401);
    // A recovery code (typed in capitals, without dashes) opens it once.
    const recovery = recoveryCodes[0] ?? '';
    const withRecovery = await api.request('POST', '/admin/v1/auth/login/mfa', {
      body: { mfa_token: third.body.mfa_token, code: recovery.replaceAll('-', '').toUpperCase() },
    });
    expect(withRecovery.status).toBe(200);
    const fourth = await passwordStep(OWNER.email, OWNER.password);
    const recoveryAgain = await api.request('POST', '/admin/v1/auth/login/mfa', {
      body: { mfa_token: fourth.body.mfa_token, code: recovery },
    });
    expect(recoveryAgain.status).toBe(401);
    const status = await api.request('GET', '/admin/v1/auth/mfa', { headers: owner });
    expect(status.body.recovery_codes_left).toBe(9);
  });

  it('asks for a fresh code to approve a device and to change the password', async () => {
    const device = await api.request('POST', '/admin/v1/auth/device/code', {
      body: { client_id: CLIENT_ID },
    });
    expect(device.status).toBe(200);
    const bare = await api.request('POST', '/admin/v1/auth/device/approve', {
      headers: owner,
      body: { user_code: device.body.user_code, action: 'approve' },
    });
    expect(bare.status).toBe(403);
    const approved = await api.request('POST', '/admin/v1/auth/device/approve', {
      headers: owner,
      body: { user_code: device.body.user_code, action: 'approve', mfa_code: recoveryCodes[1] },
    });
    expect(approved.status).toBe(200);

    const next = 'second factor password 3';
    const noCode = await api.request('POST', '/admin/v1/auth/password', {
      headers: owner,
      body: { current_password: ownerPassword, new_password: next },
    });
    expect(noCode.status).toBe(403);
    const changed = await api.request('POST', '/admin/v1/auth/password', {
      headers: owner,
      body: { current_password: ownerPassword, new_password: next, mfa_code: recoveryCodes[2] },
    });
    expect(changed.status).toBe(200);
    ownerPassword = next;
  });

  it('require_mfa (owner only): a member without a second factor may only enrol', async () => {
    const signup = await api.request('POST', '/admin/v1/auth/signup', {
      body: { ...MEMBER, tenant_name: 'mfa member home' },
    });
    expect(signup.status).toBe(201);
    const added = await api.request('POST', '/admin/v1/members', {
      headers: owner,
      body: { email: MEMBER.email, role: 'admin' },
    });
    expect(added.status).toBe(201);
    const me = await passwordStep(MEMBER.email, MEMBER.password);
    const member = { authorization: `Bearer ${me.body.token}` };
    const tenantId = (await api.request('GET', '/admin/v1/auth/session', { headers: owner })).body.tenant.id;
    expect(
      (
        await api.request('POST', '/admin/v1/auth/session/tenant', {
          headers: member,
          body: { tenant_id: tenantId },
        })
      ).status,
    ).toBe(200);
    // Only the owner changes it.
    const notOwner = await api.request('PATCH', '/admin/v1/tenant/settings', {
      headers: member,
      body: { require_mfa: true },
    });
    expect(notOwner.status).toBe(403);
    const on = await api.request('PATCH', '/admin/v1/tenant/settings', {
      headers: owner,
      body: { require_mfa: true },
    });
    expect(on.status).toBe(200);
    expect(on.body).toEqual({ require_mfa: true });

    const projects = await api.request('GET', '/admin/v1/projects', { headers: member });
    expect(projects.status).toBe(403);
    expect(projects.body.error).toMatch(/requires a second factor/);
    expect((await api.request('GET', '/admin/v1/audit-events', { headers: member })).status).toBe(403);
    expect((await api.request('GET', '/admin/v1/auth/session', { headers: member })).status).toBe(200);
    // Enrolling is allowed, and once enrolled the member is let in.
    const started = await api.request('POST', '/admin/v1/auth/mfa/totp', { headers: member });
    expect(started.status).toBe(200);
    const theirs = new TOTP({ secret: Secret.fromBase32(started.body.secret) });
    const confirmed = await api.request('POST', '/admin/v1/auth/mfa/totp/confirm', {
      headers: member,
      body: { code: theirs.generate() },
    });
    expect(confirmed.status).toBe(200);
    auditSecretsIn({ code: theirs.generate() });
    expect((await api.request('GET', '/admin/v1/projects', { headers: member })).status).toBe(200);
    // The owner still manages the setting; the owner's own enrolment is intact.
    const off = await api.request('PATCH', '/admin/v1/tenant/settings', {
      headers: owner,
      body: { require_mfa: false },
    });
    expect(off.body).toEqual({ require_mfa: false });
  });

  it('removing the factor needs a code or the password; then the login is one step again', async () => {
    const nothing = await api.request('DELETE', '/admin/v1/auth/mfa/totp', { headers: owner, body: {} });
    expect(nothing.status).toBe(400);
    const wrong = await api.request('DELETE', '/admin/v1/auth/mfa/totp', {
      headers: owner,
      body: { password: 'not the password at all' },
    });
    expect(wrong.status).toBe(403);
    // Two TOTP steps were used already (the window allows one ahead): a recovery code is the code here.
    const removed = await api.request('DELETE', '/admin/v1/auth/mfa/totp', {
      headers: owner,
      body: { code: recoveryCodes[3] },
    });
    expect(removed.status).toBe(204);
    const login = await passwordStep(OWNER.email, ownerPassword);
    expect(login.status).toBe(200);
    // The audit trail holds each step.
    const events = await api.request('GET', '/admin/v1/audit-events?limit=200', { headers: owner });
    const actions = (events.body.events as { action: string }[]).map((e) => e.action);
    for (const action of [
      'user.mfa_enroll',
      'user.mfa_confirm',
      'user.mfa_failed',
      'user.mfa_disable',
      'tenant.settings_change',
    ]) {
      expect(actions).toContain(action);
    }
    for (const code of recoveryCodes) expect(JSON.stringify(events.body)).not.toContain(code);
  });
});
