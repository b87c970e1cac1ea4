/**
 * Login and sign-up throttling through the gateway (real admin on Redis). The client IP is the
 * one the gateway derives: a trusted proxy's (127.0.0.1) `X-Forwarded-For`, else the socket's.
 * Default limits, except per account across IPs (24 instead of 100) and per IP across accounts
 * (22 instead of 50), so that reaching them costs fewer password hashes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { PASSWORD } from './support/tenant.ts';

const WRONG = 'not the password at all';
const LOGIN_WINDOW_SECONDS = 900;
const SIGNUP_WINDOW_SECONDS = 3600;
const PER_ACCOUNT_AND_IP = 10;
const PER_ACCOUNT = 24;
const PER_IP = 22;
const SIGNUPS_PER_IP = 10;
const LOGIN_REFUSED = { error: 'too many login attempts; retry later' };
const SIGNUP_REFUSED = { error: 'too many sign-ups from this address; retry later' };

type Response = Awaited<ReturnType<Stack['app']['inject']>>;

/** A 429 as the contract says: exactly `{"error"}`, and `Retry-After` within the window. */
function expectThrottled(res: Response, body: { error: string }, windowSeconds: number): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(JSON.parse(res.body)).toEqual(body);
  expect(res.headers['retry-after']).toMatch(/^[1-9][0-9]*$/);
  expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(windowSeconds);
}

function expectWrongPassword(res: Response): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(JSON.parse(res.body)).toEqual({ error: 'invalid email or password' });
  expect(res.headers['retry-after']).toBeUndefined();
}

describe('login and sign-up throttling (gateway)', () => {
  let stack: Stack;
  let seq = 0;
  let ipSeq = 0;
  /** A client IP of its own (behind the trusted proxy). */
  const newIp = () => `203.0.113.${++ipSeq}`;

  beforeAll(async () => {
    stack = await startStack('gw_login_throttle', {
      trustedProxies: ['127.0.0.1'],
      adminEnv: {
        ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP: String(PER_ACCOUNT_AND_IP),
        ADMIN_LOGIN_MAX_PER_ACCOUNT: String(PER_ACCOUNT),
        ADMIN_LOGIN_MAX_PER_IP: String(PER_IP),
        ADMIN_SIGNUP_MAX_PER_IP: String(SIGNUPS_PER_IP),
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** Through the trusted proxy (the socket is 127.0.0.1) for `ip`. */
  const login = (email: string, password: string, ip: string) =>
    stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/login',
      payload: { email, password },
      headers: { 'x-forwarded-for': ip },
    });

  const signup = (email: string, ip: string) =>
    stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/signup',
      payload: { email, password: PASSWORD, tenant_name: `tenant ${++seq}` },
      headers: { 'x-forwarded-for': ip },
    });

  /** A new account, signed up from an IP of its own. */
  async function account(label: string): Promise<string> {
    const email = `${label}-${++seq}@example.test`;
    const res = await signup(email, newIp());
    expect(res.statusCode, res.body).toBe(201);
    return email;
  }

  it('20 wrong passwords from one IP, then the right one from another IP: 200 (no lockout of the owner)', async () => {
    const email = await account('owner');
    const attacker = newIp();
    for (let i = 1; i <= 20; i++) {
      const res = await login(email, WRONG, attacker);
      // Per account and IP: the 11th attempt from that IP is refused, before any password check.
      if (i <= PER_ACCOUNT_AND_IP) expectWrongPassword(res);
      else expectThrottled(res, LOGIN_REFUSED, LOGIN_WINDOW_SECONDS);
    }
    // The right password from the attacker's IP is refused too.
    expectThrottled(await login(email, PASSWORD, attacker), LOGIN_REFUSED, LOGIN_WINDOW_SECONDS);

    const owner = await login(email, PASSWORD, newIp());
    expect(owner.statusCode, owner.body).toBe(200);
    expect(owner.json<{ token: string }>().token).toMatch(/^rpu_/);
  });

  it('per account across IPs: past the failure limit unknown clients share one attempt per slow window, refused with a Retry-After of seconds, not the window', async () => {
    const email = await account('spread');
    // Three attempts from each IP: below the per-account-and-IP limit everywhere.
    for (let i = 1; i <= PER_ACCOUNT; i++) {
      const ip = `198.51.100.${Math.ceil(i / 3)}`;
      expectWrongPassword(await login(email, WRONG, ip));
    }
    // The slow window's one attempt (ADMIN_LOGIN_SLOW_SECONDS, 10 s by default), then refusals
    // that say to come back within seconds.
    expectWrongPassword(await login(email, WRONG, newIp()));
    for (const password of [WRONG, PASSWORD]) {
      expectThrottled(await login(email, password, newIp()), LOGIN_REFUSED, 10);
    }
    // Unknown emails answer exactly alike: same statuses at the same counts.
    const unknown = `nobody-${++seq}@example.test`;
    const unknownStatuses: number[] = [];
    for (let i = 1; i <= PER_ACCOUNT + 2; i++) {
      unknownStatuses.push((await login(unknown, WRONG, `198.51.100.${100 + Math.ceil(i / 3)}`)).statusCode);
    }
    expect(unknownStatuses).toEqual([...Array(PER_ACCOUNT + 1).fill(401), 429]);
  });

  it('per IP across accounts: one IP spraying accounts is refused after its limit; the account from another IP is not', async () => {
    const sprayer = newIp();
    for (let i = 1; i <= PER_IP; i++) {
      expectWrongPassword(await login(`sprayed-${++seq}@example.test`, WRONG, sprayer));
    }
    const victim = await account('victim');
    expectThrottled(await login(victim, PASSWORD, sprayer), LOGIN_REFUSED, LOGIN_WINDOW_SECONDS);
    expect((await login(victim, PASSWORD, newIp())).statusCode).toBe(200);
  });

  it('an X-Forwarded-For from an untrusted peer does not move the client IP: the socket address is throttled', async () => {
    const email = await account('spoof');
    const fromUntrusted = (password: string, i: number) =>
      stack.app.inject({
        method: 'POST',
        url: '/admin/v1/auth/login',
        payload: { email, password },
        remoteAddress: '192.0.2.77',
        headers: { 'x-forwarded-for': `10.9.8.${i}` },
      });
    for (let i = 1; i <= PER_ACCOUNT_AND_IP; i++) expectWrongPassword(await fromUntrusted(WRONG, i));
    expectThrottled(await fromUntrusted(PASSWORD, 99), LOGIN_REFUSED, LOGIN_WINDOW_SECONDS);
  });

  it('sign-up per client IP: 429 with Retry-After after the limit; another IP still signs up', async () => {
    const ip = newIp();
    for (let i = 1; i <= SIGNUPS_PER_IP; i++) {
      const res = await signup(`signup-${++seq}@example.test`, ip);
      expect(res.statusCode, res.body).toBe(201);
    }
    const refused = await signup(`signup-${++seq}@example.test`, ip);
    expectThrottled(refused, SIGNUP_REFUSED, SIGNUP_WINDOW_SECONDS);
    // Nothing was created: the refused email can sign up from elsewhere.
    const refusedEmail = `signup-${seq}@example.test`;
    const elsewhere = await signup(refusedEmail, newIp());
    expect(elsewhere.statusCode, elsewhere.body).toBe(201);
  });

  it('documents the 429 on the login and sign-up operations', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/openapi.json' });
    const doc = res.json<{ paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }>();
    for (const path of ['/admin/v1/auth/login', '/admin/v1/auth/signup']) {
      const responses = doc.paths[path]?.post?.responses ?? {};
      expect(Object.keys(responses), path).toContain('429');
      expect(Object.keys(responses), path).not.toContain('402');
    }
  });
});
