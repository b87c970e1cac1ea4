/**
 * Sessions a user controls, over gRPC against real PostgreSQL and billing: listing (where each
 * came from, when last used, which kind), revoking one or all others, changing the password,
 * and the device grant's origin for the approval page.
 */
import type { BillingService } from '@relayplane/billing';
import { AdminService as AdminRpc, type Principal, PrincipalKind } from '@relayplane/proto/admin';
import { ManualClock } from '@relayplane/shared/clock';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_UNAVAILABLE_MESSAGE } from '../src/audit/trail.ts';
import { SAME_PASSWORD_MESSAGE, WRONG_CURRENT_PASSWORD_MESSAGE } from '../src/grpc/change-password.ts';
import { INVALID_CREDENTIALS_MESSAGE } from '../src/grpc/login.ts';
import { SESSION_NOT_FOUND_MESSAGE, USER_SESSION_NEEDED_MESSAGE } from '../src/grpc/sessions.ts';
import type { AdminService } from '../src/service.ts';
import { captureLogs, createAdmin, expectAppError, startBilling } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const NEW_PASSWORD = 'another long enough password';
const CLIENT = 'relayplane-cli';
const LAPTOP = { clientIp: '203.0.113.7', userAgent: 'Mozilla/5.0 (laptop)' };
const PHONE = { clientIp: '2001:db8::42', userAgent: 'Mozilla/5.0 (phone)' };
const SCRIPT = { clientIp: '198.51.100.9', userAgent: 'curl/8.5.0' };
const INVALID_TOKEN = 'invalid or expired token';

describe('sessions a user controls, over gRPC (real PostgreSQL, real billing)', () => {
  let database: TestDatabase;
  let billing: BillingService;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  const logs = captureLogs();
  const clock = new ManualClock(Date.parse('2026-11-28T09:00:00Z'));
  let seq = 0;

  beforeAll(async () => {
    database = await createTestDatabase('adminsessions');
    billing = await startBilling(database.url);
    admin = await createAdmin(
      database.url,
      `127.0.0.1:${billing.port}`,
      { ADMIN_DEVICE_CLIENT_IDS: CLIENT },
      { clock, logger: logs.logger },
    );
    await admin.start();
    client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
  });

  afterAll(async () => {
    client?.close();
    await admin?.destroy();
    await billing?.destroy();
    await database?.drop();
  });

  /** Calls admin as the gateway does for a client at `from` (request context → gRPC metadata). */
  function from<T>(origin: { clientIp: string; userAgent: string }, call: () => Promise<T>): Promise<T> {
    return runWithRequestContext({ requestId: `req-${++seq}`, ...origin }, call);
  }

  async function newUser(): Promise<{ email: string }> {
    const email = `sessions${++seq}@example.com`;
    await client.signup({ email, password: PASSWORD, tenantName: `sessions ${seq}` });
    return { email };
  }

  interface Login {
    token: string;
    id: string;
    principal: Principal;
  }

  async function login(email: string, origin = LAPTOP, password = PASSWORD): Promise<Login> {
    const res = await from(origin, () => client.login({ email, password, clientIp: origin.clientIp }));
    const auth = await client.authenticate({ token: res.token, via: 'bearer' });
    if (!auth.principal) throw new Error('no principal');
    return { token: res.token, id: res.session?.id ?? '', principal: auth.principal };
  }

  /** The device flow to its CLI token, started and redeemed from `device`. */
  async function cliToken(approver: Login, device = SCRIPT): Promise<{ token: string }> {
    const started = await from(device, () =>
      client.startDeviceAuthorization({ clientId: CLIENT, scope: '', clientIp: device.clientIp }),
    );
    await client.decideDeviceGrant({
      principal: approver.principal,
      userCode: started.userCode,
      approve: true,
      clientIp: '',
    });
    const res = await from(device, () =>
      client.exchangeDeviceCode({ clientId: CLIENT, deviceCode: started.deviceCode }),
    );
    return { token: res.accessToken };
  }

  async function list(principal: Principal) {
    return (await client.listSessions({ principal })).sessions.map((s) => ({
      id: s.id,
      kind: s.kind,
      createdAt: s.createdAt ? Number(s.createdAt.seconds) : undefined,
      lastUsedAt: s.lastUsedAt ? Number(s.lastUsedAt.seconds) : undefined,
      expiresAt: s.expiresAt ? Number(s.expiresAt.seconds) : undefined,
      ip: s.ip,
      userAgent: s.userAgent,
      current: s.current,
    }));
  }

  const seconds = () => Math.floor(clock.now().getTime() / 1000);

  it('lists the caller’s sessions and CLI tokens newest first: kind, origin, times, current; no token', async () => {
    const { email } = await newUser();
    const other = await newUser();
    const bearer = await login(email, SCRIPT);
    const bearerAt = seconds();
    clock.advance(1_000);
    const browser = await login(email, LAPTOP);
    // The session cookie authenticating it makes it a browser session.
    await client.authenticate({ token: browser.token, via: 'cookie' });
    const browserAt = seconds();
    clock.advance(1_000);
    const cli = await cliToken(browser, PHONE);
    const cliAt = seconds();
    clock.advance(1_000);
    await login(other.email, LAPTOP);

    const listed = await list(browser.principal);
    expect(listed).toEqual([
      {
        id: expect.stringMatching(/^ses_/),
        kind: 'cli',
        createdAt: cliAt,
        lastUsedAt: undefined,
        expiresAt: cliAt + 2_592_000,
        ip: PHONE.clientIp,
        userAgent: PHONE.userAgent,
        current: false,
      },
      {
        id: browser.id,
        kind: 'browser',
        createdAt: browserAt,
        lastUsedAt: browserAt,
        expiresAt: browserAt + 43_200,
        ip: LAPTOP.clientIp,
        userAgent: LAPTOP.userAgent,
        current: true,
      },
      {
        id: bearer.id,
        kind: 'bearer',
        createdAt: bearerAt,
        lastUsedAt: bearerAt,
        expiresAt: bearerAt + 43_200,
        ip: SCRIPT.clientIp,
        userAgent: SCRIPT.userAgent,
        current: false,
      },
    ]);
    // The same list from another session: only `current` moves.
    const fromBearer = await list(bearer.principal);
    expect(fromBearer.map((s) => [s.id, s.current])).toEqual([
      [listed[0]?.id, false],
      [browser.id, false],
      [bearer.id, true],
    ]);
    const raw = JSON.stringify(await client.listSessions({ principal: browser.principal }), (_k, v) =>
      typeof v === 'bigint' ? String(v) : v,
    );
    for (const token of [bearer.token, browser.token, cli.token]) expect(raw).not.toContain(token);
  });

  it('a bearer session stays bearer until the cookie authenticates it; a CLI token stays cli', async () => {
    const { email } = await newUser();
    const s = await login(email, SCRIPT);
    await client.authenticate({ token: s.token, via: 'bearer' });
    await client.authenticate({ token: s.token, via: '' });
    expect((await list(s.principal)).map((x) => x.kind)).toEqual(['bearer']);
    await client.authenticate({ token: s.token, via: 'cookie' });
    expect((await list(s.principal)).map((x) => x.kind)).toEqual(['browser']);
    // Once a browser holds it, bearer use does not change it back.
    await client.authenticate({ token: s.token, via: 'bearer' });
    expect((await list(s.principal)).map((x) => x.kind)).toEqual(['browser']);
  });

  it('last_used_at is written at most once a minute per session (the first cookie use at once)', async () => {
    const { email } = await newUser();
    const s = await login(email, SCRIPT);
    const lastUsed = async () => (await list(s.principal))[0]?.lastUsedAt;
    const t0 = seconds();
    expect(await lastUsed()).toBe(t0);
    clock.advance(30_000);
    await client.authenticate({ token: s.token, via: 'bearer' });
    await client.authenticate({ token: s.token, via: 'bearer' });
    expect(await lastUsed()).toBe(t0);
    clock.advance(29_000);
    await client.authenticate({ token: s.token, via: 'bearer' });
    expect(await lastUsed()).toBe(t0);
    // The cookie seen for the first time: written now, although the minute is not over.
    await client.authenticate({ token: s.token, via: 'cookie' });
    expect(await lastUsed()).toBe(t0 + 59);
    clock.advance(30_000);
    await client.authenticate({ token: s.token, via: 'cookie' });
    expect(await lastUsed()).toBe(t0 + 59);
    clock.advance(31_000);
    await client.authenticate({ token: s.token, via: 'cookie' });
    expect(await lastUsed()).toBe(t0 + 120);
  });

  it('revokes one of the caller’s sessions: its token is refused at once, the others work', async () => {
    const { email } = await newUser();
    const current = await login(email, LAPTOP);
    const victim = await login(email, PHONE);
    const cli = await cliToken(current);
    await client.revokeSession({ principal: current.principal, sessionId: victim.id });
    await expectAppError(client.authenticate({ token: victim.token }), 'unauthenticated', INVALID_TOKEN);
    await expectAppError(client.listSessions({ principal: victim.principal }), 'unauthenticated');
    expect((await client.authenticate({ token: current.token })).principal?.sessionId).toBe(current.id);
    expect((await client.authenticate({ token: cli.token })).session?.kind).toBe('cli');
    expect((await list(current.principal)).map((s) => s.id)).not.toContain(victim.id);
    // Gone: revoking it again is not_found.
    await expectAppError(
      client.revokeSession({ principal: current.principal, sessionId: victim.id }),
      'not_found',
      SESSION_NOT_FOUND_MESSAGE,
    );
  });

  it('revokes a CLI token by its id, and the current session too (a logout)', async () => {
    const { email } = await newUser();
    const current = await login(email, LAPTOP);
    const cli = await cliToken(current);
    const cliId = (await list(current.principal)).find((s) => s.kind === 'cli')?.id ?? '';
    await client.revokeSession({ principal: current.principal, sessionId: cliId });
    await expectAppError(client.authenticate({ token: cli.token }), 'unauthenticated', INVALID_TOKEN);
    await client.revokeSession({ principal: current.principal, sessionId: current.id });
    await expectAppError(client.authenticate({ token: current.token }), 'unauthenticated', INVALID_TOKEN);
  });

  it('another user’s session is not_found, like an unknown or malformed id, and keeps working', async () => {
    const alice = await newUser();
    const bob = await newUser();
    const a = await login(alice.email);
    const b = await login(bob.email);
    for (const sessionId of [b.id, 'ses_00000000000000000000', 'not-an-id', '']) {
      await expectAppError(
        client.revokeSession({ principal: a.principal, sessionId }),
        'not_found',
        SESSION_NOT_FOUND_MESSAGE,
      );
    }
    expect((await client.authenticate({ token: b.token })).principal?.sessionId).toBe(b.id);
    expect((await list(a.principal)).map((s) => s.id)).toEqual([a.id]);
  });

  it('revoke-others ends every other session and CLI token of the user (count), not other users’', async () => {
    const { email } = await newUser();
    const bystander = await newUser();
    const current = await login(email, LAPTOP);
    const others = [await login(email, PHONE), await login(email, SCRIPT)];
    const cli = await cliToken(current);
    const theirs = await login(bystander.email);
    const res = await client.revokeOtherSessions({ principal: current.principal });
    expect(res.revoked).toBe(3);
    for (const token of [...others.map((o) => o.token), cli.token]) {
      await expectAppError(client.authenticate({ token }), 'unauthenticated', INVALID_TOKEN);
    }
    expect((await list(current.principal)).map((s) => [s.id, s.current])).toEqual([[current.id, true]]);
    expect((await client.authenticate({ token: theirs.token })).principal?.sessionId).toBe(theirs.id);
    expect((await client.revokeOtherSessions({ principal: current.principal })).revoked).toBe(0);
  });

  it('revoke-others and a password change count only sessions still valid: an expired one not yet swept goes uncounted', async () => {
    const { email } = await newUser();
    const current = await login(email, LAPTOP);
    const live = await login(email, PHONE);
    const expired = await login(email, SCRIPT);
    const expire = (id: string) =>
      sql`update admin.sessions set expires_at = ${new Date(clock.now().getTime() - 1_000)} where id = ${id}`.execute(
        admin.database.db,
      );
    const remaining = async () =>
      (
        await sql<{
          id: string;
        }>`select id from admin.sessions where user_id = (select id from admin.users where email = ${email})`.execute(
          admin.database.db,
        )
      ).rows.map((r) => r.id);
    await expire(expired.id);
    expect((await client.revokeOtherSessions({ principal: current.principal })).revoked).toBe(1);
    expect(await remaining()).toEqual([current.id]);
    await expectAppError(client.authenticate({ token: live.token }), 'unauthenticated', INVALID_TOKEN);
    const { events } = await client.listAuditEvents({
      principal: current.principal,
      action: 'session.revoke',
    });
    expect(JSON.parse(events[0]?.detailsJson ?? '{}')).toMatchObject({ scope: 'others', revoked: 1 });

    const other = await login(email, PHONE);
    const stale = await login(email, SCRIPT);
    await expire(stale.id);
    const res = await client.changePassword({
      principal: current.principal,
      currentPassword: PASSWORD,
      newPassword: NEW_PASSWORD,
    });
    expect(res.revokedSessions).toBe(1);
    expect(await remaining()).toEqual([current.id]);
    await expectAppError(client.authenticate({ token: other.token }), 'unauthenticated', INVALID_TOKEN);
  });

  it('changes the password: the current session stays, every other session and CLI token ends', async () => {
    const { email } = await newUser();
    const current = await login(email, LAPTOP);
    const other = await login(email, PHONE);
    const cli = await cliToken(current);
    const res = await client.changePassword({
      principal: current.principal,
      currentPassword: PASSWORD,
      newPassword: NEW_PASSWORD,
    });
    expect(res.revokedSessions).toBe(2);
    for (const token of [other.token, cli.token]) {
      await expectAppError(client.authenticate({ token }), 'unauthenticated', INVALID_TOKEN);
    }
    expect((await client.authenticate({ token: current.token })).principal?.sessionId).toBe(current.id);
    await expectAppError(
      client.login({ email, password: PASSWORD, clientIp: '' }),
      'unauthenticated',
      INVALID_CREDENTIALS_MESSAGE,
    );
    expect((await client.login({ email, password: NEW_PASSWORD, clientIp: '' })).token).toMatch(/^rpu_/);
    // The stored hash is argon2id, never the password.
    const { rows } = await sql<{ password_hash: string }>`
      select password_hash from admin.users where email = ${email}
    `.execute(admin.database.db);
    expect(rows[0]?.password_hash).toMatch(/^\$argon2id\$/);
    expect(rows[0]?.password_hash).not.toContain(NEW_PASSWORD);
    expect(logs.lines.join('\n')).not.toContain(NEW_PASSWORD);
  });

  it('a wrong current password is forbidden and changes nothing; a weak or unchanged one is invalid', async () => {
    const { email } = await newUser();
    const current = await login(email, LAPTOP);
    const other = await login(email, PHONE);
    await expectAppError(
      client.changePassword({
        principal: current.principal,
        currentPassword: 'not the password at all',
        newPassword: NEW_PASSWORD,
      }),
      'forbidden',
      WRONG_CURRENT_PASSWORD_MESSAGE,
    );
    await expectAppError(
      client.changePassword({
        principal: current.principal,
        currentPassword: PASSWORD,
        newPassword: 'short',
      }),
      'invalid_request',
      /12/,
    );
    await expectAppError(
      client.changePassword({
        principal: current.principal,
        currentPassword: PASSWORD,
        newPassword: PASSWORD,
      }),
      'invalid_request',
      SAME_PASSWORD_MESSAGE,
    );
    await expectAppError(
      client.changePassword({ principal: current.principal, currentPassword: '', newPassword: NEW_PASSWORD }),
      'invalid_request',
      'current_password is required',
    );
    expect((await client.authenticate({ token: other.token })).principal?.sessionId).toBe(other.id);
    expect((await client.login({ email, password: PASSWORD, clientIp: '' })).token).toMatch(/^rpu_/);
  });

  it('wrong current passwords count against the account like logins: rate_limited with a retry time', async () => {
    const { email } = await newUser();
    const current = await login(email, LAPTOP);
    let last: unknown;
    for (let i = 0; i < 12; i++) {
      last = await client
        .changePassword({
          principal: current.principal,
          currentPassword: `wrong ${i}`,
          newPassword: NEW_PASSWORD,
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
    }
    expect(last).toMatchObject({ code: 'rate_limited' });
    expect((last as { retryAfterSeconds?: number }).retryAfterSeconds).toBeGreaterThan(0);
    // Throttled, even the right password is refused without a check.
    await expectAppError(
      client.changePassword({
        principal: current.principal,
        currentPassword: PASSWORD,
        newPassword: NEW_PASSWORD,
      }),
      'rate_limited',
    );
  });

  it('bot and identity principals are refused: these are a user’s own sessions', async () => {
    for (const kind of [PrincipalKind.BOT, PrincipalKind.IDENTITY]) {
      const principal = { kind, tenantId: 'ten_00000000000000000000', botId: 'bot_00000000000000000000' };
      await expectAppError(client.listSessions({ principal }), 'forbidden', USER_SESSION_NEEDED_MESSAGE);
      await expectAppError(
        client.revokeOtherSessions({ principal }),
        'forbidden',
        USER_SESSION_NEEDED_MESSAGE,
      );
      await expectAppError(
        client.revokeSession({ principal, sessionId: 'ses_00000000000000000000' }),
        'forbidden',
        USER_SESSION_NEEDED_MESSAGE,
      );
      await expectAppError(
        client.changePassword({ principal, currentPassword: PASSWORD, newPassword: NEW_PASSWORD }),
        'forbidden',
        USER_SESSION_NEEDED_MESSAGE,
      );
    }
    await expectAppError(client.listSessions({}), 'unauthenticated');
  });

  it('the approval page learns when, from where and with what the device asked', async () => {
    const { email } = await newUser();
    const approver = await login(email);
    const startedAt = seconds();
    const started = await from(SCRIPT, () =>
      client.startDeviceAuthorization({ clientId: CLIENT, scope: '', clientIp: SCRIPT.clientIp }),
    );
    clock.advance(5_000);
    const described = await from(LAPTOP, () =>
      client.describeDeviceGrant({
        principal: approver.principal,
        userCode: started.userCode,
        clientIp: LAPTOP.clientIp,
      }),
    );
    expect({
      requestedAt: Number(described.requestedAt?.seconds),
      requestedIp: described.requestedIp,
      requestedUserAgent: described.requestedUserAgent,
    }).toEqual({
      requestedAt: startedAt,
      requestedIp: SCRIPT.clientIp,
      requestedUserAgent: SCRIPT.userAgent,
    });
  });
  describe('audit events, each in the same transaction as its change', () => {
    interface Row {
      tenant_id: string | null;
      actor_type: string;
      actor_id: string;
      action: string;
      target_type: string;
      target_id: string;
      outcome: string;
      ip: string | null;
      user_agent: string | null;
      details: Record<string, unknown>;
    }

    /** The events of `action` that name `targetId`, oldest first. */
    async function events(action: string, targetId: string): Promise<Row[]> {
      const { rows } = await sql<Row>`
        select tenant_id, actor_type, actor_id, action, target_type, target_id, outcome, ip, user_agent, details
        from admin.audit_events where action = ${action} and target_id = ${targetId} order by seq
      `.execute(admin.database.db);
      return rows;
    }

    async function userOf(email: string) {
      const { rows } = await sql<{ user_id: string; tenant_id: string }>`
        select u.id as user_id, m.tenant_id from admin.users u join admin.memberships m on m.user_id = u.id
        where u.email = ${email}
      `.execute(admin.database.db);
      if (!rows[0]) throw new Error(`no user ${email}`);
      return { userId: rows[0].user_id, tenantId: rows[0].tenant_id };
    }

    it('session.login: one event per login, by the user, naming the session, with IP and user agent', async () => {
      const { email } = await newUser();
      const { userId, tenantId } = await userOf(email);
      const s = await login(email, LAPTOP);
      expect(await events('session.login', s.id)).toEqual([
        {
          tenant_id: tenantId,
          actor_type: 'user',
          actor_id: userId,
          action: 'session.login',
          target_type: 'session',
          target_id: s.id,
          outcome: 'success',
          ip: LAPTOP.clientIp,
          user_agent: LAPTOP.userAgent,
          details: { email },
        },
      ]);
    });

    it('session.login_failed: wrong password (failure, the account), unknown email (no tenant), throttled (denied)', async () => {
      const { email } = await newUser();
      const { userId, tenantId } = await userOf(email);
      await expectAppError(
        from(PHONE, () => client.login({ email, password: 'not the password', clientIp: PHONE.clientIp })),
        'unauthenticated',
      );
      expect(await events('session.login_failed', userId)).toEqual([
        {
          tenant_id: tenantId,
          actor_type: 'anonymous',
          actor_id: '',
          action: 'session.login_failed',
          target_type: 'user',
          target_id: userId,
          outcome: 'failure',
          ip: PHONE.clientIp,
          user_agent: PHONE.userAgent,
          details: { reason: 'wrong_password', email },
        },
      ]);

      const unknown = `nobody${++seq}@example.com`;
      const before = await events('session.login_failed', '');
      await expectAppError(
        from(SCRIPT, () =>
          client.login({ email: unknown, password: 'whatever it is', clientIp: SCRIPT.clientIp }),
        ),
        'unauthenticated',
      );
      const after = await events('session.login_failed', '');
      expect(after.slice(before.length)).toEqual([
        {
          tenant_id: null,
          actor_type: 'anonymous',
          actor_id: '',
          action: 'session.login_failed',
          target_type: 'user',
          target_id: '',
          outcome: 'failure',
          ip: SCRIPT.clientIp,
          user_agent: SCRIPT.userAgent,
          details: { reason: 'unknown_email' },
        },
      ]);

      // Over the per-account limit: refused without a password check, recorded as denied.
      for (let i = 0; i < 12; i++) {
        await client.login({ email, password: `wrong ${i}`, clientIp: '' }).catch(() => undefined);
      }
      const outcomes = (await events('session.login_failed', userId)).map((e) => [
        e.outcome,
        e.details.reason,
      ]);
      expect(outcomes).toContainEqual(['denied', 'throttled']);
      expect(
        outcomes.filter(([o]) => o === 'failure').length + outcomes.filter(([o]) => o === 'denied').length,
      ).toBe(13);
    });

    it('session.logout, session.revoke (one, and others with the count), user.password_change (count), device.token_issue', async () => {
      const { email } = await newUser();
      const { userId, tenantId } = await userOf(email);
      const current = await login(email, LAPTOP);
      const one = await login(email, PHONE);
      const cli = await cliToken(current, SCRIPT);
      const cliId = (await list(current.principal)).find((x) => x.kind === 'cli')?.id ?? '';
      expect(await events('device.token_issue', cliId)).toEqual([
        {
          tenant_id: tenantId,
          actor_type: 'cli',
          actor_id: userId,
          action: 'device.token_issue',
          target_type: 'session',
          target_id: cliId,
          outcome: 'success',
          ip: SCRIPT.clientIp,
          user_agent: SCRIPT.userAgent,
          details: { client_id: CLIENT, expires_at: expect.any(String) },
        },
      ]);

      await from(LAPTOP, () => client.revokeSession({ principal: current.principal, sessionId: one.id }));
      expect(await events('session.revoke', one.id)).toEqual([
        expect.objectContaining({
          tenant_id: tenantId,
          actor_type: 'user',
          actor_id: userId,
          target_type: 'session',
          outcome: 'success',
          ip: LAPTOP.clientIp,
          details: { scope: 'one', current: false },
        }),
      ]);

      const extra = await login(email, PHONE);
      await client.revokeOtherSessions({ principal: current.principal });
      expect(await events('session.revoke', userId)).toEqual([
        expect.objectContaining({
          tenant_id: tenantId,
          actor_type: 'user',
          actor_id: userId,
          target_type: 'user',
          details: {
            scope: 'others',
            revoked: 2,
            revoked_device_grants: 0,
            revoked_identity_tokens: 0,
            kept_session_id: current.id,
          },
        }),
      ]);
      await expectAppError(client.authenticate({ token: extra.token }), 'unauthenticated');
      await expectAppError(client.authenticate({ token: cli.token }), 'unauthenticated');

      const another = await login(email, PHONE);
      await client
        .changePassword({
          principal: current.principal,
          currentPassword: 'wrong password here',
          newPassword: NEW_PASSWORD,
        })
        .catch(() => undefined);
      await client.changePassword({
        principal: current.principal,
        currentPassword: PASSWORD,
        newPassword: NEW_PASSWORD,
      });
      expect(await events('user.password_change', userId)).toEqual([
        expect.objectContaining({
          tenant_id: tenantId,
          actor_type: 'user',
          outcome: 'failure',
          details: { reason: 'wrong_current_password' },
        }),
        expect.objectContaining({
          tenant_id: tenantId,
          actor_type: 'user',
          actor_id: userId,
          target_type: 'user',
          outcome: 'success',
          details: {
            revoked_sessions: 1,
            revoked_device_grants: 0,
            revoked_identity_tokens: 0,
            kept_session_id: current.id,
          },
        }),
      ]);
      await expectAppError(client.authenticate({ token: another.token }), 'unauthenticated');

      await client.logout({ principal: current.principal });
      expect(await events('session.logout', current.id)).toEqual([
        expect.objectContaining({
          tenant_id: tenantId,
          actor_type: 'user',
          actor_id: userId,
          outcome: 'success',
        }),
      ]);

      // No event holds a password or a token.
      const { rows } = await sql<{ dump: string }>`
        select coalesce(string_agg(t::text, '|'), '') as dump from admin.audit_events t
      `.execute(admin.database.db);
      for (const secret of [
        PASSWORD,
        NEW_PASSWORD,
        current.token,
        one.token,
        cli.token,
        extra.token,
        another.token,
      ]) {
        expect(rows[0]?.dump).not.toContain(secret);
      }
    });

    it('audit or refuse: when the event cannot be written, nothing is revoked and the password is unchanged', async () => {
      const { email } = await newUser();
      const current = await login(email, LAPTOP);
      const other = await login(email, PHONE);
      const db = admin.database.db;
      await sql`create or replace function sessions_audit_refuse() returns trigger language plpgsql as $$
        begin raise exception 'audit write refused by the test'; end $$`.execute(db);
      await sql`create trigger sessions_audit_refuse before insert on admin.audit_events
        for each row execute function sessions_audit_refuse()`.execute(db);
      try {
        for (const call of [
          () => client.revokeSession({ principal: current.principal, sessionId: other.id }),
          () => client.revokeOtherSessions({ principal: current.principal }),
          () =>
            client.changePassword({
              principal: current.principal,
              currentPassword: PASSWORD,
              newPassword: NEW_PASSWORD,
            }),
          () => client.logout({ principal: current.principal }),
          () => client.login({ email, password: PASSWORD, clientIp: '' }),
        ]) {
          await expectAppError(call(), 'unavailable', AUDIT_UNAVAILABLE_MESSAGE);
        }
      } finally {
        await sql`drop trigger sessions_audit_refuse on admin.audit_events`.execute(db);
      }
      for (const s of [current, other]) {
        expect((await client.authenticate({ token: s.token })).principal?.sessionId).toBe(s.id);
      }
      expect((await list(current.principal)).length).toBe(2);
      expect((await client.login({ email, password: PASSWORD, clientIp: '' })).token).toMatch(/^rpu_/);
    });
  });
});
