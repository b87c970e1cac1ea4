/**
 * The second-factor routes through the gateway (inject and the CLI in-process), on real admin,
 * PostgreSQL and Redis: enrolment and its errors, new recovery codes, the two-step login, removal, who may change
 * `require_mfa`, and `relayplane mfa`. Codes are computed with otpauth, a well-kept TOTP library.
 */
import type { InjectOptions } from 'fastify';
import { Secret, TOTP } from 'otpauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/src/errors.ts';
import { inProcessCli } from './support/cli.ts';
import { type Stack, startStack } from './support/stack.ts';
import { PASSWORD, tenant } from './support/tenant.ts';

describe('second-factor routes (gateway)', () => {
  let stack: Stack;
  let seq = 0;

  beforeAll(async () => {
    stack = await startStack('gw_mfa');
  });
  afterAll(async () => {
    await stack?.close();
  });

  const inject = (o: InjectOptions) => stack.app.inject(o);
  const user = () => tenant(stack, { email: `mfa-${++seq}@example.test`, name: `mfa ${seq}` });

  async function enrol(auth: { authorization: string }) {
    const started = await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp', headers: auth });
    expect(started.statusCode, started.body).toBe(200);
    const totp = new TOTP({ secret: Secret.fromBase32(started.json().secret) });
    const confirmed = await inject({
      method: 'POST',
      url: '/admin/v1/auth/mfa/totp/confirm',
      headers: auth,
      payload: { code: totp.generate() },
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    return { totp, recovery: confirmed.json().recovery_codes as string[] };
  }

  it('enrolment: unknown fields 400, confirm without a start 409, a wrong first code 400 (still pending), twice 409', async () => {
    const t = await user();
    const unknown = await inject({
      method: 'POST',
      url: '/admin/v1/auth/mfa/totp/confirm',
      headers: t.auth,
      payload: { code: '123456', extra: 1 },
    });
    expect(unknown.statusCode).toBe(400);
    const early = await inject({
      method: 'POST',
      url: '/admin/v1/auth/mfa/totp/confirm',
      headers: t.auth,
      payload: { code: '123456' },
    });
    expect(early.statusCode).toBe(409);
    expect(early.json()).toEqual({ error: expect.stringMatching(/start one/) });
    const started = await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp', headers: t.auth });
    const totp = new TOTP({ secret: Secret.fromBase32(started.json().secret) });
    const wrongCode = totp.generate() === '000000' ? '000001' : '000000';
    const wrong = await inject({
      method: 'POST',
      url: '/admin/v1/auth/mfa/totp/confirm',
      headers: t.auth,
      payload: { code: wrongCode },
    });
    expect(wrong.statusCode).toBe(400);
    const status = await inject({ method: 'GET', url: '/admin/v1/auth/mfa', headers: t.auth });
    expect(status.json()).toEqual({
      totp_enabled: false,
      recovery_codes_left: 0,
      tenant_requires_mfa: false,
    });
    const ok = await inject({
      method: 'POST',
      url: '/admin/v1/auth/mfa/totp/confirm',
      headers: t.auth,
      payload: { code: totp.generate() },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['cache-control']).toBe('no-store');
    expect(
      (await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp', headers: t.auth })).statusCode,
    ).toBe(409);
  });

  it('the secret is sealed at rest: the column holds neither the secret nor its base32', async () => {
    const t = await user();
    const started = await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp', headers: t.auth });
    const secret = started.json().secret as string;
    const raw = Buffer.from(new TOTP({ secret: Secret.fromBase32(secret) }).secret.bytes);
    const row = await stack.admin.database.db
      .selectFrom('user_totp')
      .select('sealed_secret')
      .where('user_id', '=', t.userId)
      .executeTakeFirst();
    const sealed = row?.sealed_secret ?? '';
    expect(sealed).toMatch(/^v1\./);
    expect(sealed).not.toContain(secret);
    expect(sealed).not.toContain(raw.toString('hex'));
    expect(sealed).not.toContain(raw.toString('base64url'));
  });

  it('new recovery codes: proven by a code, ten new ones shown once, every earlier one void, recorded without the codes', async () => {
    const t = await user();
    const renew = (code: string) =>
      inject({
        method: 'POST',
        url: '/admin/v1/auth/mfa/recovery-codes',
        headers: t.auth,
        payload: { code },
      });
    const none = await renew('123456');
    expect(none.statusCode).toBe(404);
    expect(none.json()).toEqual({ error: 'no second factor is enrolled' });

    const { recovery } = await enrol(t.auth);
    const blank = await renew('   ');
    expect(blank.statusCode).toBe(400);
    expect(blank.json()).toEqual({ error: 'send a current code (or an unused recovery code) as code' });
    // An unused recovery code proves it (the current TOTP step was spent on the confirmation).
    const first = await renew(recovery[0] ?? '');
    expect(first.statusCode, first.body).toBe(200);
    const fresh = first.json().recovery_codes as string[];
    expect(fresh).toHaveLength(10);
    expect(new Set(fresh).size).toBe(10);
    for (const c of fresh) expect(c).toMatch(/^[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}$/);
    expect(fresh.filter((c) => recovery.includes(c))).toEqual([]);
    const status = await inject({ method: 'GET', url: '/admin/v1/auth/mfa', headers: t.auth });
    expect(status.json()).toMatchObject({ totp_enabled: true, recovery_codes_left: 10 });

    // An earlier code, never used, is void now; a new one works once.
    const old = await renew(recovery[1] ?? '');
    expect(old.statusCode).toBe(401);
    expect(old.json()).toEqual({ error: expect.stringMatching(/code/) });
    expect((await renew(fresh[0] ?? '')).statusCode).toBe(200);
    expect((await renew(fresh[1] ?? '')).statusCode, 'replaced by the second renewal').toBe(401);

    const events = await inject({
      method: 'GET',
      url: '/admin/v1/audit-events?action=user.mfa_recovery_codes',
      headers: t.auth,
    });
    expect(events.statusCode).toBe(200);
    const recorded = events.json().events as { action: string; details: unknown }[];
    expect(recorded.map((e) => [e.action, e.details])).toEqual([
      ['user.mfa_recovery_codes', { factor: 'totp', proof: 'recovery_code', recovery_codes: 10 }],
      ['user.mfa_recovery_codes', { factor: 'totp', proof: 'recovery_code', recovery_codes: 10 }],
    ]);
    for (const c of [...recovery, ...fresh]) expect(events.body).not.toContain(c);
  });

  it('a bot token cannot manage a second factor; no session: 401', async () => {
    const t = await user();
    const projectId = await t.project('mfa-bots');
    const bot = await inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots`,
      headers: t.auth,
      payload: { name: 'b' },
    });
    const key = await inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots/${bot.json().id}/keys`,
      headers: t.auth,
    });
    const botAuth = { authorization: `Bearer ${key.json().token}` };
    expect(
      (await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp', headers: botAuth })).statusCode,
    ).toBe(403);
    expect((await inject({ method: 'POST', url: '/admin/v1/auth/mfa/totp' })).statusCode).toBe(401);
  });

  it('the login: 401 with mfa_required and an mfa_token, then the code; a wrong code 401; the token is single use', async () => {
    const t = await user();
    const { totp } = await enrol(t.auth);
    const first = await inject({
      method: 'POST',
      url: '/admin/v1/auth/login',
      payload: { email: t.email, password: PASSWORD },
    });
    expect(first.statusCode).toBe(401);
    const body = first.json();
    expect(body).toEqual({
      error: expect.any(String),
      mfa_required: true,
      mfa_token: expect.stringMatching(/^rpm_/),
    });
    expect(first.headers['set-cookie']).toBeUndefined();
    const current = totp.generate();
    const wrong = await inject({
      method: 'POST',
      url: '/admin/v1/auth/login/mfa',
      payload: { mfa_token: body.mfa_token, code: current === '123456' ? '654321' : '123456' },
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toEqual({ error: 'the code is wrong or was already used' });
    // The confirmation used the current step: the next one's code is accepted (one step of drift).
    const next = totp.generate({ timestamp: Date.now() + 30_000 });
    const ok = await inject({
      method: 'POST',
      url: '/admin/v1/auth/login/mfa',
      payload: { mfa_token: body.mfa_token, code: next },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().token).toMatch(/^rpu_/);
    const again = await inject({
      method: 'POST',
      url: '/admin/v1/auth/login/mfa',
      payload: { mfa_token: body.mfa_token, code: next },
    });
    expect(again.statusCode).toBe(401);
    const forged = await inject({
      method: 'POST',
      url: '/admin/v1/auth/login/mfa',
      payload: { mfa_token: 'rpm_x', code: next },
    });
    expect(forged.statusCode).toBe(401);
  });

  it('require_mfa: only the owner changes it, and only once enrolled', async () => {
    const t = await user();
    const early = await inject({
      method: 'PATCH',
      url: '/admin/v1/tenant/settings',
      headers: t.auth,
      payload: { require_mfa: true },
    });
    expect(early.statusCode).toBe(409);
    await enrol(t.auth);
    const on = await inject({
      method: 'PATCH',
      url: '/admin/v1/tenant/settings',
      headers: t.auth,
      payload: { require_mfa: true },
    });
    expect(on.json()).toEqual({ require_mfa: true });
    expect(
      (await inject({ method: 'GET', url: '/admin/v1/tenant/settings', headers: t.auth })).json(),
    ).toEqual({
      require_mfa: true,
    });
    const bad = await inject({
      method: 'PATCH',
      url: '/admin/v1/tenant/settings',
      headers: t.auth,
      payload: { require_mfa: 'yes' },
    });
    expect(bad.statusCode).toBe(400);
  });

  it('require_mfa: a member without a second factor gets 403 everywhere but the session, its sessions and enrolment; a bot of the tenant is unaffected', async () => {
    const owner = await user();
    const member = await user();
    const projectId = await owner.project('mfa-required');
    const added = await inject({
      method: 'POST',
      url: '/admin/v1/members',
      headers: owner.auth,
      payload: { email: member.email, role: 'admin' },
    });
    expect(added.statusCode, added.body).toBe(201);
    const switched = await inject({
      method: 'POST',
      url: '/admin/v1/auth/session/tenant',
      headers: member.auth,
      payload: { tenant_id: owner.tenantId },
    });
    expect(switched.statusCode, switched.body).toBe(200);
    const bot = await inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots`,
      headers: owner.auth,
      payload: { name: 'ci' },
    });
    const key = await inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots/${bot.json().id}/keys`,
      headers: owner.auth,
    });
    const botAuth = { authorization: `Bearer ${key.json().token}` };
    // Not the owner: 403 before and after.
    const notOwner = await inject({
      method: 'PATCH',
      url: '/admin/v1/tenant/settings',
      headers: member.auth,
      payload: { require_mfa: true },
    });
    expect(notOwner.statusCode).toBe(403);
    expect(
      (await inject({ method: 'GET', url: '/admin/v1/projects', headers: member.auth })).statusCode,
    ).toBe(200);
    await enrol(owner.auth);
    const on = await inject({
      method: 'PATCH',
      url: '/admin/v1/tenant/settings',
      headers: owner.auth,
      payload: { require_mfa: true },
    });
    expect(on.json()).toEqual({ require_mfa: true });

    const refused = {
      error: 'this tenant requires a second factor: enrol one first (POST /admin/v1/auth/mfa/totp)',
    };
    for (const [method, url, payload] of [
      ['GET', '/admin/v1/projects', undefined],
      ['POST', '/admin/v1/projects', { name: 'not yet' }],
      ['GET', `/admin/v1/projects/${projectId}/api-keys`, undefined],
      ['GET', '/admin/v1/members', undefined],
      ['GET', '/admin/v1/tenant/settings', undefined],
      ['PATCH', '/admin/v1/tenant/settings', { require_mfa: false }],
    ] as const) {
      const res = await inject({ method, url, headers: member.auth, ...(payload ? { payload } : {}) });
      expect([method, url, res.statusCode, res.json()]).toEqual([method, url, 403, refused]);
    }
    for (const url of ['/admin/v1/auth/session', '/admin/v1/auth/sessions', '/admin/v1/auth/mfa']) {
      const res = await inject({ method: 'GET', url, headers: member.auth });
      expect([url, res.statusCode]).toEqual([url, 200]);
    }
    const status = await inject({ method: 'GET', url: '/admin/v1/auth/mfa', headers: member.auth });
    expect(status.json()).toEqual({ totp_enabled: false, recovery_codes_left: 0, tenant_requires_mfa: true });
    // Machines are not people; the enrolled owner is let in.
    const asBot = await inject({ method: 'GET', url: '/admin/v1/projects', headers: botAuth });
    expect(asBot.statusCode, asBot.body).toBe(200);
    expect((await inject({ method: 'GET', url: '/admin/v1/projects', headers: owner.auth })).statusCode).toBe(
      200,
    );

    // Enrolling is allowed, and then the member is let in.
    await enrol(member.auth);
    expect(
      (await inject({ method: 'GET', url: '/admin/v1/projects', headers: member.auth })).statusCode,
    ).toBe(200);
  });

  describe('relayplane mfa', () => {
    const cli = inProcessCli(() => stack.app, 'mfa');

    it('enroll prints the URI, enroll --code prints ten recovery codes, status shows it, recovery-codes --code replaces them, disable --code removes it', async () => {
      const t = await user();
      const started = await cli(['mfa', 'enroll', '--json'], t.token);
      expect(started.code).toBe(EXIT.ok);
      const { otpauth_uri: uri, secret } = JSON.parse(started.stdout);
      expect(uri).toMatch(/^otpauth:\/\/totp\//);
      const human = await cli(['mfa', 'enroll'], t.token);
      expect(human.code).toBe(EXIT.ok);
      expect(human.stdout).toMatch(/relayplane mfa enroll --code/);
      // A new start replaced the secret: read it from the human output's URI.
      const replaced = /otpauth:\/\/\S+/.exec(human.stdout)?.[0] ?? '';
      expect(replaced).not.toBe(uri);
      expect(secret).not.toBe(new URL(replaced).searchParams.get('secret'));
      const totp = new TOTP({
        secret: Secret.fromBase32(new URL(replaced).searchParams.get('secret') ?? ''),
      });
      const usage = await cli(['mfa', 'enroll', '--code', '12ab56'], t.token);
      expect(usage.code).toBe(EXIT.usage);
      const confirmed = await cli(['mfa', 'enroll', '--code', totp.generate()], t.token);
      expect(confirmed.code).toBe(EXIT.ok);
      const codes: string[] = confirmed.stdout.match(/[a-z2-9]{4}-[a-z2-9]{4}-[a-z2-9]{4}/g) ?? [];
      expect(codes).toHaveLength(10);
      const status = JSON.parse((await cli(['mfa', 'status', '--json'], t.token)).stdout);
      expect(status).toMatchObject({ totp_enabled: true, recovery_codes_left: 10 });
      expect((await cli(['mfa', 'recovery-codes'], t.token)).code).toBe(EXIT.usage);
      const renewed = await cli(['mfa', 'recovery-codes', '--code', codes[0] ?? ''], t.token);
      expect(renewed.code).toBe(EXIT.ok);
      const fresh: string[] = renewed.stdout.match(/[a-z2-9]{4}-[a-z2-9]{4}-[a-z2-9]{4}/g) ?? [];
      expect(fresh).toHaveLength(10);
      expect(fresh.filter((c) => codes.includes(c))).toEqual([]);
      const stale = await cli(['mfa', 'recovery-codes', '--code', codes[1] ?? ''], t.token);
      expect(stale.code).not.toBe(EXIT.ok);
      expect(stale.stderr).toMatch(/code/);
      expect((await cli(['mfa', 'disable'], t.token)).code).toBe(EXIT.usage);
      const removed = await cli(['mfa', 'disable', '--code', fresh[0] ?? ''], t.token);
      expect(removed).toEqual({ code: EXIT.ok, stdout: 'Second factor removed.\n', stderr: '' });
      const after = JSON.parse((await cli(['mfa', 'status', '--json'], t.token)).stdout);
      expect(after.totp_enabled).toBe(false);
    });
  });
});
