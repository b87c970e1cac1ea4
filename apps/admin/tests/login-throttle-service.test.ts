/**
 * Login throttling over real gRPC: per account and client IP (tight), per account across IPs
 * (loose), per client IP across accounts; what a successful login resets, windows that end,
 * shared across replicas through Redis, and in-memory limits when Redis is down.
 */
import { createHash } from 'node:crypto';
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
import { INVALID_CREDENTIALS_MESSAGE, LOGIN_RATE_LIMITED_MESSAGE } from '../src/grpc/login.ts';
import type { AdminService } from '../src/service.ts';
import { captureLogs, createAdmin, startBilling } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const WRONG = 'not the password at all';
const WINDOW_SECONDS = 900;

async function outcome(call: Promise<unknown>): Promise<AppError | 'ok'> {
  try {
    await call;
    return 'ok';
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
}

async function expectRateLimited(call: Promise<unknown>): Promise<void> {
  const err = await outcome(call);
  expect(err).toBeInstanceOf(AppError);
  const appError = err as AppError;
  expect(appError.code).toBe('rate_limited');
  expect(appError.message).toBe(LOGIN_RATE_LIMITED_MESSAGE);
  expect(appError.retryAfterSeconds).toBeGreaterThan(0);
  expect(appError.retryAfterSeconds).toBeLessThanOrEqual(WINDOW_SECONDS);
}

async function expectInvalidCredentials(call: Promise<unknown>): Promise<void> {
  const err = await outcome(call);
  expect(err).toBeInstanceOf(AppError);
  expect((err as AppError).code).toBe('unauthenticated');
  expect((err as AppError).message).toBe(INVALID_CREDENTIALS_MESSAGE);
}

async function waitUntil(what: string, condition: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('login throttling over gRPC', () => {
  let database: TestDatabase;
  let billing: BillingService;
  const open: { admin: AdminService; client: ServiceClient<typeof AdminRpc> }[] = [];
  let seq = 0;
  const uniqueEmail = (label: string) => `${label}-${++seq}@example.com`;
  let ipSeq = 0;
  const uniqueIp = () => `198.51.100.${++ipSeq}`;

  async function startAdmin(env: Record<string, string>, overrides: Parameters<typeof createAdmin>[3] = {}) {
    const admin = await createAdmin(database.url, `127.0.0.1:${billing.port}`, env, overrides);
    await admin.start();
    const client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
    open.push({ admin, client });
    return { admin, client };
  }

  async function signUp(client: ServiceClient<typeof AdminRpc>, label: string): Promise<string> {
    const email = uniqueEmail(label);
    await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    return email;
  }

  /** The session.login_failed events of an account, oldest first: outcome and details. */
  async function refusals(admin: AdminService, email: string) {
    const { rows } = await sql<{ outcome: string; details: Record<string, unknown> }>`
      select e.outcome, e.details from admin.audit_events e join admin.users u on u.id = e.target_id
      where e.action = 'session.login_failed' and u.email = ${email} order by e.seq
    `.execute(admin.database.db);
    return rows;
  }

  beforeAll(async () => {
    database = await createTestDatabase('adminthrottle');
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

  describe('in memory (no Redis), small limits', () => {
    // 3 per account and IP, 6 per account from every IP, 5 per IP across accounts.
    const env = {
      ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP: '3',
      ADMIN_LOGIN_MAX_PER_ACCOUNT: '6',
      ADMIN_LOGIN_MAX_PER_IP: '5',
    };
    const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));
    let client: ServiceClient<typeof AdminRpc>;
    let admin: AdminService;

    beforeAll(async () => {
      ({ client, admin } = await startAdmin(env, { clock }));
    });

    const throttles = async (email: string) =>
      (await refusals(admin, email)).filter((e) => e.outcome === 'denied').map((e) => e.details.throttle);

    it('per account and IP: the 4th attempt from one IP is refused, even with the right password; the owner from another IP gets in', async () => {
      const email = await signUp(client, 'acct-ip');
      const ip = uniqueIp();
      for (let i = 0; i < 3; i++) {
        await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: ip }));
      }
      // Counted before any verification: the right password does not get through from there.
      await expectRateLimited(client.login({ email, password: PASSWORD, clientIp: ip }));
      // The same account however the email is written.
      await expectRateLimited(
        client.login({ email: ` ${email.toUpperCase()} `, password: PASSWORD, clientIp: ip }),
      );
      expect(await outcome(client.login({ email, password: PASSWORD, clientIp: uniqueIp() }))).toBe('ok');
      expect(await throttles(email)).toEqual(['account_ip', 'account_ip']);
    });

    it('per account across IPs: past the failure limit unknown clients share one attempt per slow window (a short Retry-After, never the window); a known device is not slowed', async () => {
      const email = await signUp(client, 'acct');
      const known = await client.login({ email, password: PASSWORD, clientIp: uniqueIp() });
      expect(known.deviceToken).not.toBe('');
      for (let i = 0; i < 6; i++) {
        await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: uniqueIp() }));
      }
      // The slow window's one attempt: a guess that fails (and counts).
      await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: uniqueIp() }));
      const slowed = await outcome(client.login({ email, password: PASSWORD, clientIp: uniqueIp() }));
      expect(slowed).toBeInstanceOf(AppError);
      expect((slowed as AppError).code).toBe('rate_limited');
      expect((slowed as AppError).retryAfterSeconds).toBeGreaterThan(0);
      expect((slowed as AppError).retryAfterSeconds).toBeLessThanOrEqual(10);
      await expectRateLimited(client.login({ email, password: PASSWORD, clientIp: '' }));
      // The known device is never refused by the account-wide limit, from any address.
      expect(
        await outcome(
          client.login({ email, password: PASSWORD, clientIp: uniqueIp(), deviceToken: known.deviceToken }),
        ),
      ).toBe('ok');
      // Another client after the slow window (10 s by default): in at once.
      clock.advance(10_000);
      expect(await outcome(client.login({ email, password: PASSWORD, clientIp: uniqueIp() }))).toBe('ok');
      // Without Redis every refusal is its own event.
      expect(await throttles(email)).toEqual(['account', 'account']);
      // Another account is unaffected.
      const other = await signUp(client, 'acct-other');
      expect(await outcome(client.login({ email: other, password: PASSWORD, clientIp: uniqueIp() }))).toBe(
        'ok',
      );
    });

    it('throttles unknown emails exactly like known ones, per account and IP and per account', async () => {
      const answers = async (email: string, password: string) => {
        const ip = uniqueIp();
        const codes: string[] = [];
        for (let i = 0; i < 4; i++) {
          const res = await outcome(
            client.login({ email, password: i === 3 ? password : WRONG, clientIp: ip }),
          );
          codes.push(res === 'ok' ? 'ok' : res.code);
        }
        for (let i = 0; i < 5; i++) {
          const res = await outcome(client.login({ email, password: WRONG, clientIp: uniqueIp() }));
          codes.push(res === 'ok' ? 'ok' : res.code);
        }
        clock.advance(10_000);
        return codes;
      };
      const expected = [
        ...Array(3).fill('unauthenticated'),
        'rate_limited',
        // 3 failures so far (the refused attempt is none): 3 more fit under 6, then the slow
        // window's one attempt, then a refusal until it ends.
        ...Array(4).fill('unauthenticated'),
        'rate_limited',
      ];
      expect(await answers(await signUp(client, 'known'), PASSWORD)).toEqual(expected);
      expect(await answers(uniqueEmail('nobody'), PASSWORD)).toEqual(expected);
    });

    it('per IP across accounts: one IP spraying accounts is stopped, the account from other IPs and unknown IPs is not', async () => {
      const ip = uniqueIp();
      for (let i = 0; i < 5; i++) {
        await expectInvalidCredentials(
          client.login({ email: uniqueEmail('spray'), password: WRONG, clientIp: ip }),
        );
      }
      const victim = await signUp(client, 'victim');
      await expectRateLimited(client.login({ email: victim, password: PASSWORD, clientIp: ip }));
      expect(await throttles(victim)).toEqual(['ip']);
      expect(await outcome(client.login({ email: victim, password: PASSWORD, clientIp: uniqueIp() }))).toBe(
        'ok',
      );
      expect(await outcome(client.login({ email: victim, password: PASSWORD, clientIp: '' }))).toBe('ok');
    });

    it('counts the attempts without a client IP as one client for the tight limit', async () => {
      const email = await signUp(client, 'no-ip');
      for (let i = 0; i < 3; i++) {
        await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: '' }));
      }
      await expectRateLimited(client.login({ email, password: PASSWORD, clientIp: '' }));
      expect(await outcome(client.login({ email, password: PASSWORD, clientIp: uniqueIp() }))).toBe('ok');
    });

    it("takes the client IP from the request context (the gateway's x-client-ip) first", async () => {
      const email = await signUp(client, 'context-ip');
      const ip = uniqueIp();
      const viaContext = (password: string, requestIp: string) =>
        runWithRequestContext({ requestId: `req-${++seq}`, clientIp: ip }, () =>
          client.login({ email, password, clientIp: requestIp }),
        );
      for (let i = 0; i < 3; i++) await expectInvalidCredentials(viaContext(WRONG, uniqueIp()));
      await expectRateLimited(viaContext(PASSWORD, ''));
      await expectRateLimited(client.login({ email, password: PASSWORD, clientIp: ip }));
    });

    it('a success clears the account and IP count, not the account failures across IPs', async () => {
      const email = await signUp(client, 'reset');
      const ip = uniqueIp();
      for (let i = 0; i < 2; i++) {
        await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: ip }));
      }
      expect(await outcome(client.login({ email, password: PASSWORD, clientIp: ip }))).toBe('ok');
      // From that IP the count starts again.
      for (let i = 0; i < 2; i++) {
        await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: ip }));
      }
      // The account has 4 failures (the success is none): two more fit under 6, then one attempt
      // per slow window, then a refusal.
      await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: uniqueIp() }));
      await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: uniqueIp() }));
      await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: uniqueIp() }));
      await expectRateLimited(client.login({ email, password: PASSWORD, clientIp: uniqueIp() }));
      clock.advance(10_000);
    });

    it('allows attempts again once the window has passed, with Retry-After counting down', async () => {
      const email = await signUp(client, 'window');
      const ip = uniqueIp();
      for (let i = 0; i < 3; i++) {
        await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: ip }));
      }
      const first = (await outcome(client.login({ email, password: WRONG, clientIp: ip }))) as AppError;
      expect(first.retryAfterSeconds).toBe(WINDOW_SECONDS);
      clock.advance(600_000);
      const later = (await outcome(client.login({ email, password: WRONG, clientIp: ip }))) as AppError;
      expect(later.code).toBe('rate_limited');
      expect(later.retryAfterSeconds).toBe(300);
      clock.advance(300_000);
      expect(await outcome(client.login({ email, password: PASSWORD, clientIp: ip }))).toBe('ok');
    });
  });

  describe('on Redis', () => {
    const testRedis = createTestRedis('adminthrottle');
    const inspector = new Redis(testRedis.url);
    let a: ServiceClient<typeof AdminRpc>;
    let b: ServiceClient<typeof AdminRpc>;
    let adminA: AdminService;
    const env = { ADMIN_REDIS_URL: testRedis.url, ADMIN_REDIS_PREFIX: testRedis.prefix };
    const sha = (email: string) => createHash('sha256').update(email).digest('hex');
    const accountKey = (email: string) => `${testRedis.prefix}login:acct:${sha(email)}`;
    const accountIpKey = (email: string, ip: string) =>
      `${testRedis.prefix}login:acct-ip:${sha(email)}:${ip}`;

    beforeAll(async () => {
      ({ client: a, admin: adminA } = await startAdmin(env));
      ({ client: b } = await startAdmin(env));
    });

    afterAll(async () => {
      await testRedis.clean();
      inspector.disconnect();
    });

    it('shares the counts between replicas and stores them under the documented keys', async () => {
      const email = await signUp(a, 'redis');
      const ip = uniqueIp();
      for (let i = 0; i < 10; i++) {
        const replica = i % 2 === 0 ? a : b;
        await expectInvalidCredentials(replica.login({ email, password: WRONG, clientIp: ip }));
      }
      expect(await inspector.get(accountKey(email))).toBe('10');
      expect(await inspector.get(accountIpKey(email, ip))).toBe('10');
      expect(await inspector.get(`${testRedis.prefix}login:ip:${ip}`)).toBe('10');
      for (const key of [accountKey(email), accountIpKey(email, ip)]) {
        const ttl = await inspector.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(WINDOW_SECONDS * 1000);
      }
      await expectRateLimited(a.login({ email, password: PASSWORD, clientIp: ip }));
      await expectRateLimited(b.login({ email, password: PASSWORD, clientIp: ip }));
      // The owner from another IP gets in; that clears only its own account and IP key.
      const home = uniqueIp();
      expect(await outcome(b.login({ email, password: PASSWORD, clientIp: home }))).toBe('ok');
      expect(await inspector.exists(accountIpKey(email, home))).toBe(0);
      expect(await inspector.get(accountIpKey(email, ip))).toBe('12');
      // The account-wide count is of failures: the refusals and the success add none.
      expect(await inspector.get(accountKey(email))).toBe('10');

      // The window ends (its TTL rewritten to 1 ms): attempts from that IP are allowed again.
      await inspector.pexpire(accountIpKey(email, ip), 1);
      await waitUntil(
        'the account and IP window to expire',
        async () => (await inspector.exists(accountIpKey(email, ip))) === 0,
      );
      expect(await outcome(a.login({ email, password: PASSWORD, clientIp: ip }))).toBe('ok');
      expect(await inspector.exists(accountIpKey(email, ip))).toBe(0);
    });

    it('records one throttled refusal per throttle key and window across replicas, with how many refusals it stands for', async () => {
      const email = await signUp(a, 'flood');
      for (let i = 0; i < 10; i++) {
        await expectInvalidCredentials((i % 2 ? a : b).login({ email, password: WRONG, clientIp: '' }));
      }
      for (let i = 0; i < 6; i++) {
        await expectRateLimited((i % 2 ? a : b).login({ email, password: WRONG, clientIp: '' }));
      }
      // Wrong passwords one event each (bounded by the throttle); six refusals, one event.
      const first = await refusals(adminA, email);
      expect(first.filter((e) => e.outcome === 'failure')).toHaveLength(10);
      expect(first.filter((e) => e.outcome === 'denied').map((e) => e.details)).toEqual([
        { reason: 'throttled', email, throttle: 'account_ip', refused: 1 },
      ]);

      // The next window's first refusal records, counting the five the last window left unrecorded.
      const key = accountIpKey(email, '-');
      const marker = `${testRedis.prefix}login:refused:{${key.slice(testRedis.prefix.length)}}:recorded`;
      expect(await inspector.pttl(marker)).toBeGreaterThan(0);
      await inspector.pexpire(key, 1);
      await inspector.pexpire(marker, 1);
      await waitUntil('the window to expire', async () => (await inspector.exists(key, marker)) === 0);
      for (let i = 0; i < 10; i++) {
        await expectInvalidCredentials(a.login({ email, password: WRONG, clientIp: '' }));
      }
      await expectRateLimited(b.login({ email, password: WRONG, clientIp: '' }));
      await expectRateLimited(a.login({ email, password: WRONG, clientIp: '' }));
      const denied = (await refusals(adminA, email)).filter((e) => e.outcome === 'denied');
      expect(denied.map((e) => [e.details.throttle, e.details.refused])).toEqual([
        ['account_ip', 1],
        ['account_ip', 6],
      ]);
    });
  });

  describe('with Redis unreachable', () => {
    it('still applies the limits in memory, warning once', async () => {
      const logs = captureLogs();
      const { admin, client } = await startAdmin(
        { ADMIN_REDIS_URL: 'redis://127.0.0.1:1', ADMIN_REDIS_PREFIX: 'dead:' },
        { logger: logs.logger },
      );
      const email = await signUp(client, 'dead');
      const ip = uniqueIp();
      for (let i = 0; i < 10; i++) {
        await expectInvalidCredentials(client.login({ email, password: WRONG, clientIp: ip }));
      }
      await expectRateLimited(client.login({ email, password: PASSWORD, clientIp: ip }));
      await expectRateLimited(client.login({ email, password: WRONG, clientIp: ip }));
      expect(await outcome(client.login({ email, password: PASSWORD, clientIp: uniqueIp() }))).toBe('ok');
      // Nothing to tell which refusal of the window records: each one does, as without Redis.
      const denied = (await refusals(admin, email)).filter((e) => e.outcome === 'denied');
      expect(denied.map((e) => e.details)).toEqual([
        { reason: 'throttled', email, throttle: 'account_ip', refused: 1 },
        { reason: 'throttled', email, throttle: 'account_ip', refused: 1 },
      ]);
      const fallbacks = logs.lines.filter(
        (l) => JSON.parse(l).msg === 'login throttle falling back to in-memory limits',
      );
      expect(fallbacks).toHaveLength(1);
    });
  });
});
