import { createHash } from 'node:crypto';
import type { BillingService } from '@relayplane/billing';
import { AppError } from '@relayplane/contract/errors';
import { parseToken } from '@relayplane/contract/tokens';
import { AdminService as AdminRpc, type Principal } from '@relayplane/proto/admin';
import { ManualClock } from '@relayplane/shared/clock';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { auditSecretsIn } from '@relayplane/testing/audit';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLI_TOKEN_CANNOT_APPROVE_MESSAGE,
  DEVICE_CODES_RATE_LIMITED_MESSAGE,
  USER_CODE_NOT_FOUND_MESSAGE,
  USER_CODE_RATE_LIMITED_MESSAGE,
} from '../src/grpc/device-flow.ts';
import type { AdminService } from '../src/service.ts';
import { captureLogs, createAdmin, startBilling } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const CLIENT = 'relayplane-cli';
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

async function errorOf(call: Promise<unknown>): Promise<AppError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return err as AppError;
}

async function expectOAuthError(call: Promise<unknown>, oauthCode: string): Promise<void> {
  const err = await errorOf(call);
  expect({ code: err.code, message: err.message }).toEqual({ code: 'invalid_request', message: oauthCode });
}

describe('device authorization grant over gRPC (real PostgreSQL, real billing)', () => {
  let database: TestDatabase;
  let billing: BillingService;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  const logs = captureLogs();
  const clock = new ManualClock(Date.parse('2026-11-26T10:00:00Z'));
  let seq = 0;
  /** Every code and token answered, to prove none of them reached a log line. */
  const secrets: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('admindevice');
    billing = await startBilling(database.url);
    admin = await createAdmin(
      database.url,
      `127.0.0.1:${billing.port}`,
      { ADMIN_DEVICE_CLIENT_IDS: `${CLIENT},other-cli` },
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

  /** A fresh tenant and its owner's session principal. */
  async function newUser(): Promise<{
    principal: Principal;
    userId: string;
    tenantId: string;
    email: string;
  }> {
    const email = `dev${++seq}@example.com`;
    await client.signup({ email, password: PASSWORD, tenantName: `device ${seq}` });
    const login = await client.login({ email, password: PASSWORD, clientIp: '' });
    const { principal } = await client.authenticate({ token: login.token });
    if (!principal) throw new Error('no principal');
    return { principal, userId: principal.userId, tenantId: principal.tenantId, email };
  }

  async function start(clientIp = '198.51.100.1') {
    const res = await client.startDeviceAuthorization({ clientId: CLIENT, scope: '', clientIp });
    secrets.push(res.deviceCode, res.userCode);
    auditSecretsIn(res);
    return res;
  }

  async function poll(deviceCode: string, clientId = CLIENT) {
    const res = await client.exchangeDeviceCode({ clientId, deviceCode });
    secrets.push(res.accessToken);
    return res;
  }

  it('starts a grant: 256-bit device code, XXXX-XXXX user code, 600 s, 5 s; only SHA-256 of both stored', async () => {
    const res = await start();
    expect(res.deviceCode).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(res.userCode).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(res.expiresIn).toBe(600);
    expect(res.interval).toBe(5);
    const { rows } = await sql<Record<string, unknown>>`
      select * from admin.device_grants where device_code_hash = ${sha256(res.deviceCode)}
    `.execute(admin.database.db);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      user_code_hash: sha256(res.userCode),
      client_id: CLIENT,
      status: 'pending',
      interval_seconds: 5,
    });
    const dump = await sql<{ dump: string }>`
      select string_agg(t::text, '|') as dump from admin.device_grants t
    `.execute(admin.database.db);
    expect(dump.rows[0]?.dump).not.toContain(res.deviceCode);
    expect(dump.rows[0]?.dump).not.toContain(res.userCode);
  });

  it('refuses unknown clients (invalid_client), a missing client (invalid_request) and a bad scope', async () => {
    await expectOAuthError(
      client.startDeviceAuthorization({ clientId: 'evil', scope: '', clientIp: '' }),
      'invalid_client',
    );
    await expectOAuthError(
      client.startDeviceAuthorization({ clientId: '', scope: '', clientIp: '' }),
      'invalid_request',
    );
    await expectOAuthError(
      client.startDeviceAuthorization({ clientId: CLIENT, scope: 'a\u0000b', clientIp: '' }),
      'invalid_scope',
    );
  });

  it('answers authorization_pending, then slow_down with the interval growing by 5 s per early poll', async () => {
    const { deviceCode } = await start();
    const interval = async () =>
      (
        await sql<{ interval_seconds: number }>`
          select interval_seconds from admin.device_grants where device_code_hash = ${sha256(deviceCode)}
        `.execute(admin.database.db)
      ).rows[0]?.interval_seconds;
    await expectOAuthError(poll(deviceCode), 'authorization_pending');
    clock.advance(1_000);
    await expectOAuthError(poll(deviceCode), 'slow_down');
    expect(await interval()).toBe(10);
    clock.advance(6_000);
    await expectOAuthError(poll(deviceCode), 'slow_down');
    expect(await interval()).toBe(15);
    clock.advance(15_000);
    await expectOAuthError(poll(deviceCode), 'authorization_pending');
    expect(await interval()).toBe(15);
  });

  it('approval: the page sees the client, the device gets one CLI token of the approver (kind cli), once', async () => {
    const owner = await newUser();
    const { deviceCode, userCode } = await start();
    const typed = userCode.toLowerCase().replace('-', ' ');
    const described = await client.describeDeviceGrant({
      principal: owner.principal,
      userCode: typed,
      clientIp: '198.51.100.2',
    });
    expect(described.clientId).toBe(CLIENT);
    expect(described.userCode).toBe(userCode);
    expect(Number(described.expiresAt?.seconds)).toBe(Math.floor(clock.now().getTime() / 1000) + 600);

    const decided = await client.decideDeviceGrant({
      principal: owner.principal,
      userCode: typed,
      approve: true,
      clientIp: '198.51.100.2',
    });
    expect(decided).toMatchObject({ status: 'approved', clientId: CLIENT });
    // Decided codes are gone for the page: approving (or denying) again is not_found.
    const again = await errorOf(
      client.decideDeviceGrant({ principal: owner.principal, userCode, approve: false, clientIp: '' }),
    );
    expect({ code: again.code, message: again.message }).toEqual({
      code: 'not_found',
      message: USER_CODE_NOT_FOUND_MESSAGE,
    });

    const token = await poll(deviceCode);
    expect(parseToken(token.accessToken)).toBe('cli');
    expect(token.expiresIn).toBe(2_592_000);
    const auth = await client.authenticate({ token: token.accessToken });
    expect(auth.session?.kind).toBe('cli');
    expect(auth.session?.user?.email).toBe(owner.email);
    expect(auth.principal).toMatchObject({ userId: owner.userId, tenantId: owner.tenantId });
    expect(Number(auth.session?.expiresAt?.seconds)).toBe(
      Math.floor(clock.now().getTime() / 1000) + 2_592_000,
    );
    // Login sessions stay kind "session".
    const login = await client.login({ email: owner.email, password: PASSWORD, clientIp: '' });
    expect((await client.authenticate({ token: login.token })).session?.kind).toBe('session');

    await expectOAuthError(poll(deviceCode), 'invalid_grant');

    // A CLI token cannot approve another device (it could otherwise renew itself forever).
    const other = await start();
    const refused = await errorOf(
      client.decideDeviceGrant({
        principal: auth.principal,
        userCode: other.userCode,
        approve: true,
        clientIp: '',
      }),
    );
    expect({ code: refused.code, message: refused.message }).toEqual({
      code: 'forbidden',
      message: CLI_TOKEN_CANNOT_APPROVE_MESSAGE,
    });
  });

  it('answers exactly one token when many polls of an approved grant race', async () => {
    const owner = await newUser();
    const { deviceCode, userCode } = await start();
    await client.decideDeviceGrant({ principal: owner.principal, userCode, approve: true, clientIp: '' });
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => poll(deviceCode)));
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost.map((r) => (r.reason as AppError).message)).toEqual(Array(11).fill('invalid_grant'));
    const sessions = await sql<{ n: number }>`
      select count(*)::int as n from admin.sessions where user_id = ${owner.userId} and kind = 'cli'
    `.execute(admin.database.db);
    expect(sessions.rows[0]?.n).toBe(1);
  });

  it('answers access_denied after a denial, on every later poll', async () => {
    const owner = await newUser();
    const { deviceCode, userCode } = await start();
    const decided = await client.decideDeviceGrant({
      principal: owner.principal,
      userCode,
      approve: false,
      clientIp: '',
    });
    expect(decided).toMatchObject({ status: 'denied', clientId: CLIENT });
    await expectOAuthError(poll(deviceCode), 'access_denied');
    clock.advance(5_000);
    await expectOAuthError(poll(deviceCode), 'access_denied');
  });

  it('expires: the page no longer finds the code and the device gets expired_token', async () => {
    const owner = await newUser();
    const { deviceCode, userCode } = await start();
    clock.advance(600_000);
    const err = await errorOf(
      client.describeDeviceGrant({ principal: owner.principal, userCode, clientIp: '' }),
    );
    expect(err.code).toBe('not_found');
    const decided = await errorOf(
      client.decideDeviceGrant({ principal: owner.principal, userCode, approve: true, clientIp: '' }),
    );
    expect(decided.code).toBe('not_found');
    await expectOAuthError(poll(deviceCode), 'expired_token');
  });

  it('refuses a device code of another client (invalid_grant), unknown codes, clients and missing fields', async () => {
    const { deviceCode } = await start();
    await expectOAuthError(poll(deviceCode, 'other-cli'), 'invalid_grant');
    await expectOAuthError(poll('not-a-device-code'), 'invalid_grant');
    await expectOAuthError(poll('x'.repeat(500)), 'invalid_grant');
    await expectOAuthError(poll(deviceCode, 'evil'), 'invalid_client');
    await expectOAuthError(poll(''), 'invalid_request');
    // The refused polls left the grant alone: the first real poll is not "too soon".
    await expectOAuthError(poll(deviceCode), 'authorization_pending');
  });

  it('malformed user codes are 400; user code entry is limited per user (20 per 15 min) with Retry-After', async () => {
    const user = await newUser();
    const bad = await errorOf(
      client.describeDeviceGrant({ principal: user.principal, userCode: 'AEIO-UAEI', clientIp: '' }),
    );
    expect(bad.code).toBe('invalid_request');
    for (let i = 1; i < 20; i++) {
      const e = await errorOf(
        client.describeDeviceGrant({ principal: user.principal, userCode: 'BBBB-BBBB', clientIp: '' }),
      );
      expect(e.code).toBe('not_found');
    }
    const limited = await errorOf(
      client.decideDeviceGrant({
        principal: user.principal,
        userCode: 'BBBB-BBBB',
        approve: true,
        clientIp: '',
      }),
    );
    expect(limited.code).toBe('rate_limited');
    expect(limited.message).toBe(USER_CODE_RATE_LIMITED_MESSAGE);
    expect(limited.retryAfterSeconds).toBeGreaterThan(0);
    expect(limited.retryAfterSeconds).toBeLessThanOrEqual(900);
  });

  it('user code entry is limited per client IP (60 per 15 min) across users', async () => {
    const users = await Promise.all([newUser(), newUser(), newUser(), newUser()]);
    const ip = '203.0.113.77';
    let n = 0;
    for (const user of users) {
      for (let i = 0; i < 15; i++, n++) {
        const e = await errorOf(
          client.describeDeviceGrant({ principal: user.principal, userCode: 'CCCC-CCCC', clientIp: ip }),
        );
        expect(e.code).toBe('not_found');
      }
    }
    expect(n).toBe(60);
    const fresh = await newUser();
    const limited = await errorOf(
      client.describeDeviceGrant({ principal: fresh.principal, userCode: 'CCCC-CCCC', clientIp: ip }),
    );
    expect(limited.code).toBe('rate_limited');
  });

  it('device code issuance is limited per client IP (30 per 15 min)', async () => {
    const ip = '203.0.113.99';
    for (let i = 0; i < 30; i++) await start(ip);
    const limited = await errorOf(
      client.startDeviceAuthorization({ clientId: CLIENT, scope: '', clientIp: ip }),
    );
    expect(limited.code).toBe('rate_limited');
    expect(limited.message).toBe(DEVICE_CODES_RATE_LIMITED_MESSAGE);
    expect(limited.retryAfterSeconds).toBeGreaterThan(0);
    // Another IP is unaffected.
    await start('203.0.113.100');
  });

  it('never logs a device code, a user code or a token', () => {
    expect(secrets.length).toBeGreaterThan(20);
    const all = logs.lines.join('\n');
    for (const secret of secrets.filter(Boolean)) expect(all).not.toContain(secret);
    expect(all).toContain('device authorization redeemed: CLI token issued');
  });
});
