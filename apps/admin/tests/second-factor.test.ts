/**
 * A second factor for people (issue 31), over gRPC against real PostgreSQL and billing: TOTP
 * enrolment, the codes an authenticator app computes (the otpauth library here, never our own
 * TOTP code), each time step accepted once, recovery codes used once, concurrent uses of one code
 * of which exactly one wins, the per-user throttle, removal, and a tenant's `require_mfa` as admin
 * enforces it on its own (no gateway in front). The clock is driven: a new TOTP step is 30 s on it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { MFA_ENROLMENT_REQUIRED_MESSAGE } from '@relayplane/contract/errors';
import { AdminService as AdminRpc, type Principal, TenantRole } from '@relayplane/proto/admin';
import { ManualClock } from '@relayplane/shared/clock';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { auditSecretsIn } from '@relayplane/testing/audit';
import { sql } from 'kysely';
import { Secret, TOTP, URI } from 'otpauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALREADY_ENROLLED_MESSAGE,
  DISABLE_NEEDS_PROOF_MESSAGE,
  NOT_ENROLLED_MESSAGE,
  NOTHING_TO_CONFIRM_MESSAGE,
  OWNER_ONLY_MESSAGE,
  WRONG_FIRST_CODE_MESSAGE,
  WRONG_PASSWORD_MESSAGE,
} from '../src/grpc/mfa.ts';
import { USER_SESSION_NEEDED_MESSAGE } from '../src/grpc/sessions.ts';
import { SecretSealer } from '../src/mfa/sealing.ts';
import { MFA_RATE_LIMITED_MESSAGE, WRONG_CODE_MESSAGE } from '../src/mfa/second-factor.ts';
import type { AdminService } from '../src/service.ts';
import { type AdminRig, createAdmin, expectAppError, startAdminRig, TEST_KEK } from './support/harness.ts';

const PASSWORD = 'a long enough password';
/** The per-user code limit in this file (ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP). */
const MAX_ATTEMPTS = 10;
const WINDOW_SECONDS = 900;
const STEP_MS = 30_000;

interface User {
  email: string;
  userId: string;
  tenantId: string;
  token: string;
  principal: Principal;
}

interface Enrolled extends User {
  totp: TOTP;
  secret: string;
  recoveryCodes: string[];
}

describe('a second factor (TOTP and recovery codes), over gRPC (real PostgreSQL, real billing)', () => {
  let rig: AdminRig | undefined;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  const clock = new ManualClock(Date.parse('2026-11-28T12:00:05Z'));
  let seq = 0;

  beforeAll(async () => {
    rig = await startAdminRig(
      'adminmfa',
      {
        ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP: String(MAX_ATTEMPTS),
        ADMIN_LOGIN_WINDOW_SECONDS: String(WINDOW_SECONDS),
        ADMIN_SIGNUP_MAX_PER_IP: '1000',
      },
      { clock },
    );
    ({ admin, client } = rig);
  });

  afterAll(async () => {
    await rig?.close();
  });

  /** A code of the app at the test clock's time (offset by whole steps). */
  const codeOf = (totp: TOTP, steps = 0) =>
    totp.generate({ timestamp: clock.now().getTime() + steps * STEP_MS });

  async function principalOf(token: string): Promise<Principal> {
    const { principal } = await client.authenticate({ token });
    if (!principal) throw new Error('no principal');
    return principal;
  }

  async function user(label = 'mfa'): Promise<User> {
    const email = `${label}${++seq}@example.com`;
    const res = await client.signup({ email, password: PASSWORD, tenantName: `${label} ${seq}` });
    const login = await client.login({ email, password: PASSWORD, clientIp: '' });
    return {
      email,
      userId: res.user?.id ?? '',
      tenantId: res.tenant?.id ?? '',
      token: login.token,
      principal: await principalOf(login.token),
    };
  }

  /** Enrols `who` with the app's first code, then moves the clock to the next step (that one is used). */
  async function enrol(who: User): Promise<Enrolled> {
    const started = await client.startTotpEnrollment({ principal: who.principal });
    auditSecretsIn(started);
    const totp = new TOTP({
      secret: Secret.fromBase32(started.secret),
      algorithm: 'SHA1',
      digits: 6,
      period: 30,
    });
    const confirmed = await client.confirmTotpEnrollment({ principal: who.principal, code: codeOf(totp) });
    auditSecretsIn(confirmed);
    clock.advance(STEP_MS);
    return { ...who, totp, secret: started.secret, recoveryCodes: confirmed.recoveryCodes };
  }

  async function enrolled(label = 'mfa'): Promise<Enrolled> {
    return enrol(await user(label));
  }

  /** The password step of an enrolled user: no session, an mfa_token. */
  async function passwordStep(email: string): Promise<string> {
    const res = await client.login({ email, password: PASSWORD, clientIp: '' });
    expect(res.mfaRequired).toBe(true);
    expect(res.token).toBe('');
    auditSecretsIn(res);
    return res.mfaToken;
  }

  async function eventsOf(userId: string) {
    return admin.database.db
      .selectFrom('audit_events')
      .select(['action', 'outcome', 'details'])
      .where('target_id', '=', userId)
      .orderBy('seq')
      .execute();
  }

  it('enrols: a base32 secret and its otpauth URI; a new start replaces the pending secret; an app code confirms it and answers ten recovery codes; a second enrolment is refused', async () => {
    const who = await user();
    const first = await client.startTotpEnrollment({ principal: who.principal });
    auditSecretsIn(first);
    expect(first.secret).toMatch(/^[A-Z2-7]{32}$/);
    // What an authenticator app reads from the URI.
    const parsed = URI.parse(first.otpauthUri);
    expect(parsed).toBeInstanceOf(TOTP);
    const app = parsed as TOTP;
    expect(app.secret.base32).toBe(first.secret);
    expect(app.issuer).toBe('Relayplane');
    expect(app.label).toBe(who.email);
    expect([app.algorithm, app.digits, app.period]).toEqual(['SHA1', 6, 30]);
    await expectAppError(
      client.confirmTotpEnrollment({ principal: who.principal, code: 'abcdef' }),
      'invalid_request',
    );

    const second = await client.startTotpEnrollment({ principal: who.principal });
    auditSecretsIn(second);
    expect(second.secret).not.toBe(first.secret);
    // The replaced secret's code no longer confirms anything.
    const stale = codeOf(app);
    const current = new TOTP({ secret: Secret.fromBase32(second.secret) });
    if (![-1, 0, 1].some((s) => codeOf(current, s) === stale)) {
      await expectAppError(
        client.confirmTotpEnrollment({ principal: who.principal, code: stale }),
        'invalid_request',
        WRONG_FIRST_CODE_MESSAGE,
      );
    }
    expect((await client.getMfaStatus({ principal: who.principal })).totpEnabled).toBe(false);
    // Until confirmed, the login is one step.
    expect((await client.login({ email: who.email, password: PASSWORD, clientIp: '' })).mfaRequired).toBe(
      false,
    );

    const confirmed = await client.confirmTotpEnrollment({ principal: who.principal, code: codeOf(current) });
    auditSecretsIn(confirmed);
    expect(confirmed.recoveryCodes).toHaveLength(10);
    expect(new Set(confirmed.recoveryCodes).size).toBe(10);
    for (const code of confirmed.recoveryCodes)
      expect(code).toMatch(/^[a-hjkmnp-z2-9]{4}(-[a-hjkmnp-z2-9]{4}){2}$/);
    const status = await client.getMfaStatus({ principal: who.principal });
    expect(status).toMatchObject({ totpEnabled: true, recoveryCodesLeft: 10, tenantRequiresMfa: false });
    expect(status.confirmedAt?.seconds).toBe(BigInt(Math.floor(clock.now().getTime() / 1000)));

    await expectAppError(
      client.startTotpEnrollment({ principal: who.principal }),
      'conflict',
      ALREADY_ENROLLED_MESSAGE,
    );
    await expectAppError(
      client.confirmTotpEnrollment({ principal: who.principal, code: codeOf(current) }),
      'conflict',
      ALREADY_ENROLLED_MESSAGE,
    );
    await passwordStep(who.email);

    const events = await eventsOf(who.userId);
    expect(events.map((e) => e.action)).toEqual(['user.mfa_enroll', 'user.mfa_enroll', 'user.mfa_confirm']);
    expect(events[2]?.details).toEqual({ factor: 'totp', recovery_codes: 10 });
    const recorded = JSON.stringify(events);
    for (const secret of [first.secret, second.secret, ...confirmed.recoveryCodes]) {
      expect(recorded).not.toContain(secret);
    }
  });

  it('keeps the secret sealed and only the recovery codes’ SHA-256 at rest', async () => {
    const who = await enrolled();
    const bytes = Buffer.from(Secret.fromBase32(who.secret).bytes);
    const { rows: totpRows } = await sql<Record<string, unknown>>`
      select * from admin.user_totp where user_id = ${who.userId}`.execute(admin.database.db);
    expect(totpRows).toHaveLength(1);
    const row = JSON.stringify(totpRows);
    for (const form of [
      who.secret,
      who.secret.toLowerCase(),
      bytes.toString('hex'),
      bytes.toString('base64url'),
    ]) {
      expect(row).not.toContain(form.replace(/=+$/, ''));
    }
    expect(totpRows[0]?.sealed_secret).toMatch(/^v1\./);

    const { rows: codeRows } = await sql<Record<string, unknown>>`
      select * from admin.user_recovery_codes where user_id = ${who.userId}`.execute(admin.database.db);
    expect(codeRows).toHaveLength(10);
    const stored = JSON.stringify(codeRows);
    for (const code of who.recoveryCodes) {
      expect(stored).not.toContain(code);
      expect(stored).not.toContain(code.replaceAll('-', ''));
    }
    expect(codeRows.map((r) => r.code_hash).sort()).toEqual(
      who.recoveryCodes.map((c) => createHash('sha256').update(c.replaceAll('-', '')).digest('hex')).sort(),
    );
  });

  it('logs in with an app code; the same code is refused the second time, so is an older one; the next step’s code is accepted', async () => {
    const who = await enrolled();
    const code = codeOf(who.totp);
    const session = await client.loginMfa({ mfaToken: await passwordStep(who.email), code, clientIp: '' });
    auditSecretsIn(session);
    expect((await client.authenticate({ token: session.token })).session?.user?.id).toBe(who.userId);

    // The same code, within its 30 s: replay refused (and recorded).
    await expectAppError(
      client.loginMfa({ mfaToken: await passwordStep(who.email), code, clientIp: '' }),
      'unauthenticated',
      WRONG_CODE_MESSAGE,
    );
    // The previous step's code is still inside the ±1 window, but older than the one used.
    const older = codeOf(who.totp, -1);
    if (older !== code) {
      await expectAppError(
        client.loginMfa({ mfaToken: await passwordStep(who.email), code: older, clientIp: '' }),
        'unauthenticated',
        WRONG_CODE_MESSAGE,
      );
    }
    clock.advance(STEP_MS);
    const next = codeOf(who.totp);
    expect(next === code).toBe(false);
    const again = await client.loginMfa({
      mfaToken: await passwordStep(who.email),
      code: next,
      clientIp: '',
    });
    auditSecretsIn(again);
    expect(again.token).toMatch(/^rpu_/);

    const failures = (await eventsOf(who.userId)).filter((e) => e.action === 'user.mfa_failed');
    expect(failures.length).toBeGreaterThanOrEqual(1);
    expect(failures.every((e) => e.outcome === 'failure')).toBe(true);
    expect(JSON.stringify(failures)).not.toContain(code);
  });

  it('a recovery code works once (any case, with or without dashes), then it is refused; codes left count down', async () => {
    const who = await enrolled();
    const [code = ''] = who.recoveryCodes;
    const typed = ` ${code.toUpperCase().replaceAll('-', ' ')} `;
    const session = await client.loginMfa({
      mfaToken: await passwordStep(who.email),
      code: typed,
      clientIp: '',
    });
    auditSecretsIn(session);
    expect(session.token).toMatch(/^rpu_/);
    const status = await client.getMfaStatus({ principal: who.principal });
    expect(status.recoveryCodesLeft).toBe(9);
    await expectAppError(
      client.loginMfa({ mfaToken: await passwordStep(who.email), code, clientIp: '' }),
      'unauthenticated',
      WRONG_CODE_MESSAGE,
    );
    // Another user's code is not this user's.
    const other = await enrolled();
    await expectAppError(
      client.loginMfa({
        mfaToken: await passwordStep(who.email),
        code: other.recoveryCodes[0] ?? '',
        clientIp: '',
      }),
      'unauthenticated',
      WRONG_CODE_MESSAGE,
    );
    expect((await client.getMfaStatus({ principal: who.principal })).recoveryCodesLeft).toBe(9);
    expect((await client.getMfaStatus({ principal: other.principal })).recoveryCodesLeft).toBe(10);
  });

  describe('two concurrent uses of one code: exactly one wins', () => {
    const outcomes = (results: PromiseSettledResult<unknown>[]) => ({
      won: results.filter((r) => r.status === 'fulfilled').length,
      lost: results
        .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
        .map((r) => (r.reason as { code?: string }).code),
    });

    it('two confirmations of one pending enrolment: one set of recovery codes', async () => {
      const who = await user();
      const started = await client.startTotpEnrollment({ principal: who.principal });
      auditSecretsIn(started);
      const code = codeOf(new TOTP({ secret: Secret.fromBase32(started.secret) }));
      const results = await Promise.allSettled([
        client.confirmTotpEnrollment({ principal: who.principal, code }),
        client.confirmTotpEnrollment({ principal: who.principal, code }),
      ]);
      for (const r of results) if (r.status === 'fulfilled') auditSecretsIn(r.value);
      expect(outcomes(results)).toEqual({ won: 1, lost: ['conflict'] });
      const winner = results.find((r) => r.status === 'fulfilled') as PromiseFulfilledResult<{
        recoveryCodes: string[];
      }>;
      const { rows } = await sql<{ code_hash: string }>`
        select code_hash from admin.user_recovery_codes where user_id = ${who.userId}`.execute(
        admin.database.db,
      );
      expect(rows.map((r) => r.code_hash).sort()).toEqual(
        winner.value.recoveryCodes
          .map((c) => createHash('sha256').update(c.replaceAll('-', '')).digest('hex'))
          .sort(),
      );
    });

    it('one TOTP code sent to two login challenges at once: one session', async () => {
      const who = await enrolled();
      const [a, b] = [await passwordStep(who.email), await passwordStep(who.email)];
      const code = codeOf(who.totp);
      const results = await Promise.allSettled([
        client.loginMfa({ mfaToken: a, code, clientIp: '' }),
        client.loginMfa({ mfaToken: b, code, clientIp: '' }),
      ]);
      for (const r of results) if (r.status === 'fulfilled') auditSecretsIn(r.value);
      expect(outcomes(results)).toEqual({ won: 1, lost: ['unauthenticated'] });
    });

    it('one recovery code sent twice at once: used once', async () => {
      const who = await enrolled();
      const [a, b] = [await passwordStep(who.email), await passwordStep(who.email)];
      const code = who.recoveryCodes[3] ?? '';
      const results = await Promise.allSettled([
        client.loginMfa({ mfaToken: a, code, clientIp: '' }),
        client.loginMfa({ mfaToken: b, code, clientIp: '' }),
      ]);
      for (const r of results) if (r.status === 'fulfilled') auditSecretsIn(r.value);
      expect(outcomes(results)).toEqual({ won: 1, lost: ['unauthenticated'] });
      expect((await client.getMfaStatus({ principal: who.principal })).recoveryCodesLeft).toBe(9);
    });
  });

  it('counts every code against the user: past the limit even the right code is refused (rate_limited) until the window ends', async () => {
    const who = await enrolled();
    const right = codeOf(who.totp);
    const wrong = String((Number(right) + 1) % 1_000_000).padStart(6, '0');
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      await expectAppError(
        client.disableTotp({ principal: who.principal, code: wrong, password: '' }),
        'unauthenticated',
        WRONG_CODE_MESSAGE,
      );
    }
    await expectAppError(
      client.disableTotp({ principal: who.principal, code: right, password: '' }),
      'rate_limited',
      MFA_RATE_LIMITED_MESSAGE,
    );
    expect((await client.getMfaStatus({ principal: who.principal })).totpEnabled).toBe(true);
    const failures = (await eventsOf(who.userId)).filter((e) => e.action === 'user.mfa_failed');
    expect(failures).toHaveLength(MAX_ATTEMPTS);
    clock.advance(WINDOW_SECONDS * 1000);
    await client.disableTotp({ principal: who.principal, code: codeOf(who.totp), password: '' });
    expect((await client.getMfaStatus({ principal: who.principal })).totpEnabled).toBe(false);
  });

  it('removal needs a current code, an unused recovery code or the password; a wrong password is refused and recorded; then the login is one step', async () => {
    const byPassword = await enrolled();
    await expectAppError(
      client.disableTotp({ principal: byPassword.principal, code: '', password: '' }),
      'invalid_request',
      DISABLE_NEEDS_PROOF_MESSAGE,
    );
    await expectAppError(
      client.disableTotp({ principal: byPassword.principal, code: '', password: 'not the password at all' }),
      'forbidden',
      WRONG_PASSWORD_MESSAGE,
    );
    expect((await client.getMfaStatus({ principal: byPassword.principal })).totpEnabled).toBe(true);
    await client.disableTotp({ principal: byPassword.principal, code: '', password: PASSWORD });
    const status = await client.getMfaStatus({ principal: byPassword.principal });
    expect(status).toMatchObject({ totpEnabled: false, recoveryCodesLeft: 0 });
    const { rows } =
      await sql`select 1 from admin.user_recovery_codes where user_id = ${byPassword.userId}`.execute(
        admin.database.db,
      );
    expect(rows).toHaveLength(0);
    await expectAppError(
      client.disableTotp({ principal: byPassword.principal, code: '', password: PASSWORD }),
      'not_found',
      NOT_ENROLLED_MESSAGE,
    );
    const login = await client.login({ email: byPassword.email, password: PASSWORD, clientIp: '' });
    auditSecretsIn(login);
    expect(login.mfaRequired).toBe(false);
    expect(login.token).toMatch(/^rpu_/);
    const disables = (await eventsOf(byPassword.userId)).filter((e) => e.action === 'user.mfa_disable');
    expect(disables.map((e) => [e.outcome, e.details])).toEqual([
      ['failure', { factor: 'totp', proof: 'password', reason: 'wrong_password' }],
      ['success', { factor: 'totp', proof: 'password', was: 'confirmed' }],
    ]);

    const byRecoveryCode = await enrolled();
    await client.disableTotp({
      principal: byRecoveryCode.principal,
      code: byRecoveryCode.recoveryCodes[9] ?? '',
      password: '',
    });
    expect((await client.getMfaStatus({ principal: byRecoveryCode.principal })).totpEnabled).toBe(false);
    const [last] = (await eventsOf(byRecoveryCode.userId)).filter((e) => e.action === 'user.mfa_disable');
    expect(last?.details).toEqual({ factor: 'totp', proof: 'recovery_code', was: 'confirmed' });

    // A secret of a removed enrolment opens nothing: a new enrolment has its own.
    const again = await enrol(byRecoveryCode);
    expect(again.secret).not.toBe(byRecoveryCode.secret);
  });

  it('bots and identity tokens cannot manage a second factor', async () => {
    const owner = await enrolled('mfabots');
    const { project } = await client.createProject({
      principal: owner.principal,
      name: 'main',
      environment: '',
    });
    const { bot } = await client.createBot({
      principal: owner.principal,
      projectId: project?.id ?? '',
      name: 'ci',
      role: TenantRole.DEVELOPER,
    });
    const key = await client.createBotKey({
      principal: owner.principal,
      projectId: project?.id ?? '',
      botId: bot?.id ?? '',
    });
    auditSecretsIn(key);
    const asBot = await principalOf(key.token);
    for (const call of [
      () => client.startTotpEnrollment({ principal: asBot }),
      () => client.confirmTotpEnrollment({ principal: asBot, code: '123456' }),
      () => client.disableTotp({ principal: asBot, code: '123456', password: '' }),
      () => client.getMfaStatus({ principal: asBot }),
      () => client.updateTenantSettings({ principal: asBot, requireMfa: false }),
    ]) {
      await expectAppError(call(), 'forbidden', USER_SESSION_NEEDED_MESSAGE);
    }
    await expectAppError(
      client.confirmTotpEnrollment({ principal: owner.principal, code: '123456' }),
      'conflict',
    );
    const fresh = await user();
    await expectAppError(
      client.confirmTotpEnrollment({ principal: fresh.principal, code: '123456' }),
      'conflict',
      NOTHING_TO_CONFIRM_MESSAGE,
    );
  });

  it('require_mfa: the owner only, once enrolled; then a member without a factor may only enrol (admin refuses on its own); bots and identity tokens are unaffected', async () => {
    const owner = await user('mfaowner');
    const member = await user('mfamember');
    await admin.accounts.addMembership(owner.tenantId, member.userId, 'admin', clock.now());
    await client.switchTenant({ principal: member.principal, tenantId: owner.tenantId });
    // The principal names the session's tenant: the gateway would authenticate the token again.
    member.principal = await principalOf(member.token);

    await expectAppError(
      client.updateTenantSettings({ principal: owner.principal, requireMfa: true }),
      'conflict',
      /enrol a second factor yourself/,
    );
    await enrol(owner);
    await expectAppError(
      client.updateTenantSettings({ principal: member.principal, requireMfa: true }),
      'forbidden',
      OWNER_ONLY_MESSAGE,
    );
    const { project } = await client.createProject({
      principal: owner.principal,
      name: 'main',
      environment: '',
    });
    const projectId = project?.id ?? '';
    const { bot } = await client.createBot({
      principal: owner.principal,
      projectId,
      name: 'ci',
      role: TenantRole.DEVELOPER,
    });
    const key = await client.createBotKey({ principal: owner.principal, projectId, botId: bot?.id ?? '' });
    const identity = await client.createIdentityToken({
      principal: owner.principal,
      projectId,
      identityId: bot?.id ?? '',
      scopes: ['projects:read'],
    });
    auditSecretsIn(key);
    auditSecretsIn(identity);

    expect(await client.updateTenantSettings({ principal: owner.principal, requireMfa: true })).toEqual(
      expect.objectContaining({ requireMfa: true }),
    );
    const [change] = (
      await admin.database.db
        .selectFrom('audit_events')
        .select(['action', 'details'])
        .where('target_id', '=', owner.tenantId)
        .where('action', '=', 'tenant.settings_change')
        .execute()
    ).map((e) => e.details);
    expect(change).toEqual({ require_mfa: true });

    // The member: the session still authenticates, flagged; everything else is refused by admin itself.
    expect((await client.authenticate({ token: member.token })).mfaEnrolmentRequired).toBe(true);
    expect((await client.listSessions({ principal: member.principal })).sessions.length).toBeGreaterThan(0);
    for (const call of [
      () => client.listProjects({ principal: member.principal }),
      () => client.createProject({ principal: member.principal, name: 'nope', environment: '' }),
      () => client.listMembers({ principal: member.principal }),
      () => client.getTenantSettings({ principal: member.principal }),
      () => client.updateTenantSettings({ principal: member.principal, requireMfa: false }),
      () => client.disableTotp({ principal: member.principal, code: '', password: PASSWORD }),
    ]) {
      await expectAppError(call(), 'forbidden', MFA_ENROLMENT_REQUIRED_MESSAGE);
    }
    expect((await client.getMfaStatus({ principal: member.principal })).tenantRequiresMfa).toBe(true);

    // Machines are not people: unaffected.
    expect((await client.listProjects({ principal: await principalOf(key.token) })).projects).toHaveLength(1);
    expect(
      (await client.listProjects({ principal: await principalOf(identity.value) })).projects,
    ).toHaveLength(1);
    // The enrolled owner is let in.
    expect((await client.getTenantSettings({ principal: owner.principal })).requireMfa).toBe(true);

    // Enrolling is allowed, and then the member is let in.
    await enrol(member);
    expect((await client.listProjects({ principal: member.principal })).projects).toHaveLength(1);
    expect((await client.authenticate({ token: member.token })).mfaEnrolmentRequired).toBe(false);

    expect(await client.updateTenantSettings({ principal: owner.principal, requireMfa: false })).toEqual(
      expect.objectContaining({ requireMfa: false }),
    );
  });

  // Last: it re-seals every secret in this database under another KEK than the rig's.
  it('a KEK rotation: secrets open under the previous KEK, are re-sealed under the new one, and then the previous KEK can go; a wrong KEK is reported', async () => {
    const who = await enrolled('mfakek');
    const sealedOf = async () =>
      (
        await admin.database.db
          .selectFrom('user_totp')
          .select('sealed_secret')
          .where('user_id', '=', who.userId)
          .executeTakeFirstOrThrow()
      ).sealed_secret;
    const before = await sealedOf();
    const newKek = randomBytes(32).toString('base64');
    const billingAddress = `127.0.0.1:${rig?.billing.port}`;
    const url = rig?.database.url ?? '';
    const gaugeOf = async (service: AdminService) =>
      (await service.metrics.getSingleMetric('relayplane_admin_totp_secrets_sealed_by_previous_kek')?.get())
        ?.values[0]?.value;

    const loginWith = async (service: AdminService) => {
      const other = connect(AdminRpc, `127.0.0.1:${service.port}`);
      try {
        clock.advance(STEP_MS);
        const challenge = await other.login({ email: who.email, password: PASSWORD, clientIp: '' });
        auditSecretsIn(challenge);
        const session = await other.loginMfa({
          mfaToken: challenge.mfaToken,
          code: codeOf(who.totp),
          clientIp: '',
        });
        auditSecretsIn(session);
        return session.token;
      } finally {
        other.close();
      }
    };

    const rotated = await createAdmin(
      url,
      billingAddress,
      { RELAYPLANE_KEK: newKek, RELAYPLANE_KEK_PREVIOUS: TEST_KEK },
      { clock },
    );
    try {
      await rotated.start();
      const pass = await rotated.totpResealer.run();
      expect(pass.unopened).toBe(0);
      expect(await gaugeOf(rotated)).toBe(0);
      const after = await sealedOf();
      expect(after).not.toBe(before);
      expect(new SecretSealer(Buffer.from(newKek, 'base64')).open(after, who.userId)).toBeDefined();
      expect(await loginWith(rotated)).toMatch(/^rpu_/);
    } finally {
      await rotated.destroy();
    }

    // The previous KEK removed: the re-sealed secret still opens.
    const next = await createAdmin(url, billingAddress, { RELAYPLANE_KEK: newKek }, { clock });
    try {
      await next.start();
      expect(await loginWith(next)).toMatch(/^rpu_/);
      expect((await next.totpResealer.run()).unopened).toBe(0);
    } finally {
      await next.destroy();
    }

    // A wrong KEK opens none of them, and says so.
    const wrong = await createAdmin(
      url,
      billingAddress,
      { RELAYPLANE_KEK: randomBytes(32).toString('base64') },
      { clock },
    );
    try {
      await wrong.start();
      const pass = await wrong.totpResealer.run();
      expect(pass.unopened).toBeGreaterThan(0);
      expect(await gaugeOf(wrong)).toBe(pass.unopened);
      expect(await sealedOf()).not.toBe(before);
    } finally {
      await wrong.destroy();
    }
  });
});
