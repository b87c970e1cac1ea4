/**
 * Sign-up throttling over real gRPC: per client IP (the request context's, as the gateway sends
 * it in `x-client-ip`) in its own window; what counts; shared across replicas through Redis.
 */
import type { BillingService } from '@relayplane/billing';
import { AppError } from '@relayplane/contract/errors';
import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { ManualClock } from '@relayplane/shared/clock';
import { runWithRequestContext } from '@relayplane/shared/request-context';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIGNUP_RATE_LIMITED_MESSAGE } from '../src/grpc/signup.ts';
import type { AdminService } from '../src/service.ts';
import { createAdmin, startBilling } from './support/harness.ts';

const PASSWORD = 'a long enough password';

describe('sign-up throttling over gRPC', () => {
  let database: TestDatabase;
  let billing: BillingService;
  const open: { admin: AdminService; client: ServiceClient<typeof AdminRpc> }[] = [];
  let seq = 0;
  let ipSeq = 0;
  const uniqueIp = () => `192.0.2.${++ipSeq}`;

  async function startAdmin(env: Record<string, string>, overrides: Parameters<typeof createAdmin>[3] = {}) {
    const admin = await createAdmin(database.url, `127.0.0.1:${billing.port}`, env, overrides);
    await admin.start();
    const client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
    open.push({ admin, client });
    return { admin, client };
  }

  /** A sign-up from `ip` (undefined: no client IP, as a direct gRPC caller): 'ok' or the AppError's code. */
  async function signUp(
    client: ServiceClient<typeof AdminRpc>,
    ip: string | undefined,
    body: { email?: string; password?: string } = {},
  ): Promise<string> {
    const req = {
      email: body.email ?? `signup-${++seq}@example.com`,
      password: body.password ?? PASSWORD,
      tenantName: `signup ${seq}`,
    };
    const call = () => client.signup(req);
    try {
      await (ip === undefined
        ? call()
        : runWithRequestContext({ requestId: `req-${++seq}`, clientIp: ip }, call));
      return 'ok';
    } catch (err) {
      if (err instanceof AppError) return err.code;
      throw err;
    }
  }

  async function refusal(client: ServiceClient<typeof AdminRpc>, ip: string): Promise<AppError> {
    try {
      await runWithRequestContext({ requestId: `req-${++seq}`, clientIp: ip }, () =>
        client.signup({ email: `refused-${++seq}@example.com`, password: PASSWORD, tenantName: 'refused' }),
      );
    } catch (err) {
      if (err instanceof AppError) return err;
      throw err;
    }
    throw new Error('expected the sign-up to be refused');
  }

  async function tenantCount(admin: AdminService): Promise<number> {
    const { rows } = await sql<{ n: string }>`select count(*) as n from admin.tenants`.execute(
      admin.database.db,
    );
    return Number(rows[0]?.n);
  }

  beforeAll(async () => {
    database = await createTestDatabase('adminsignupthrottle');
    billing = await startBilling(database.url);
  });

  afterAll(async () => {
    for (const { admin, client } of open) {
      client.close();
      await admin.destroy();
    }
    await billing?.destroy();
    await database?.drop();
  });

  describe('in memory (no Redis): 2 per IP in 600 s', () => {
    const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));
    let client: ServiceClient<typeof AdminRpc>;
    let admin: AdminService;

    beforeAll(async () => {
      ({ client, admin } = await startAdmin(
        { ADMIN_SIGNUP_MAX_PER_IP: '2', ADMIN_SIGNUP_WINDOW_SECONDS: '600' },
        { clock },
      ));
    });

    it('refuses the 3rd sign-up from one IP with the time left in the window; other IPs and unknown ones still sign up', async () => {
      const ip = uniqueIp();
      expect([await signUp(client, ip), await signUp(client, ip)]).toEqual(['ok', 'ok']);
      const tenantsBefore = await tenantCount(admin);
      const refused = await refusal(client, ip);
      expect(refused.code).toBe('rate_limited');
      expect(refused.message).toBe(SIGNUP_RATE_LIMITED_MESSAGE);
      expect(refused.retryAfterSeconds).toBe(600);
      // Nothing was created by the refused one.
      expect(await tenantCount(admin)).toBe(tenantsBefore);

      expect(await signUp(client, uniqueIp())).toBe('ok');
      expect(await signUp(client, undefined)).toBe('ok');

      clock.advance(400_000);
      expect((await refusal(client, ip)).retryAfterSeconds).toBe(200);
      clock.advance(200_000);
      expect(await signUp(client, ip)).toBe('ok');
    });

    it('does not count malformed sign-ups (400); counts a taken email (409) like a new one', async () => {
      const ip = uniqueIp();
      for (let i = 0; i < 3; i++) {
        expect(await signUp(client, ip, { password: 'short' })).toBe('invalid_request');
      }
      expect(await signUp(client, ip)).toBe('ok');
      const taken = `taken-${++seq}@example.com`;
      expect(await signUp(client, uniqueIp(), { email: taken })).toBe('ok');
      expect(await signUp(client, ip, { email: taken })).toBe('conflict');
      expect(await signUp(client, ip)).toBe('rate_limited');
    });
  });

  describe('on Redis', () => {
    const testRedis = createTestRedis('adminsignupthrottle');
    const inspector = new Redis(testRedis.url);
    const env = {
      ADMIN_REDIS_URL: testRedis.url,
      ADMIN_REDIS_PREFIX: testRedis.prefix,
      ADMIN_SIGNUP_MAX_PER_IP: '3',
    };

    afterAll(async () => {
      await testRedis.clean();
      inspector.disconnect();
    });

    it('shares the count between replicas under signup:ip:<ip>, with the default 3600 s window as TTL', async () => {
      const { client: a } = await startAdmin(env);
      const { client: b } = await startAdmin(env);
      const ip = uniqueIp();
      expect([await signUp(a, ip), await signUp(b, ip), await signUp(a, ip)]).toEqual(['ok', 'ok', 'ok']);
      const key = `${testRedis.prefix}signup:ip:${ip}`;
      expect(await inspector.get(key)).toBe('3');
      const ttl = await inspector.pttl(key);
      expect(ttl).toBeGreaterThan(3_590_000);
      expect(ttl).toBeLessThanOrEqual(3_600_000);
      const refused = await refusal(b, ip);
      expect(refused.code).toBe('rate_limited');
      expect(refused.retryAfterSeconds).toBeGreaterThan(3_590);
      expect(refused.retryAfterSeconds).toBeLessThanOrEqual(3_600);
      expect(await signUp(a, uniqueIp())).toBe('ok');
    });
  });
});
