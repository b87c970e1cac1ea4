/**
 * Login throttling through the gateway (real admin on Redis, default limits: 10 attempts per
 * account in a 900 s window): 429 with `Retry-After`, never 402.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { PASSWORD } from './support/tenant.ts';

const WRONG = 'not the password at all';
const WINDOW_SECONDS = 900;

describe('login throttling (gateway)', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack('gw_login_throttle');
  });
  afterAll(async () => {
    await stack?.close();
  });

  const login = (email: string, password: string, ip: string) =>
    stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/login',
      payload: { email, password },
      remoteAddress: ip,
    });

  it('answers 429 with Retry-After on the 11th attempt for an account, from any IP, and never 402', async () => {
    const email = 'throttled@example.test';
    const signup = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/signup',
      payload: { email, password: PASSWORD, tenant_name: 'throttled inc' },
    });
    expect(signup.statusCode).toBe(201);

    const statuses: number[] = [];
    for (let i = 1; i <= 10; i++) {
      const res = await login(email, WRONG, `203.0.113.${i}`);
      statuses.push(res.statusCode);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'invalid email or password' });
      expect(res.headers['retry-after']).toBeUndefined();
    }

    // The right password from a fresh IP is throttled too: the account is over its limit.
    for (const [password, ip] of [
      [WRONG, '203.0.113.11'],
      [PASSWORD, '203.0.113.12'],
    ] as const) {
      const res = await login(email, password, ip);
      statuses.push(res.statusCode);
      expect(res.statusCode).toBe(429);
      expect(JSON.parse(res.body)).toEqual({ error: 'too many login attempts; retry later' });
      expect(res.headers['retry-after']).toMatch(/^[1-9][0-9]*$/);
      const retryAfter = Number(res.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(WINDOW_SECONDS);
    }
    expect(statuses).not.toContain(402);
  });

  it('throttles an unknown email the same way, so the answer reveals nothing about the account', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 11; i++) {
      const res = await login('nobody-here@example.test', WRONG, `198.51.100.${i}`);
      statuses.push(res.statusCode);
    }
    expect(statuses).toEqual([...Array(10).fill(401), 429]);
    expect(statuses).not.toContain(402);
  });

  it('documents the 429 on the login operation', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/openapi.json' });
    const doc = res.json<{ paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }>();
    const responses = doc.paths['/admin/v1/auth/login']?.post?.responses ?? {};
    expect(Object.keys(responses)).toContain('429');
    expect(Object.keys(responses)).not.toContain('402');
  });
});
