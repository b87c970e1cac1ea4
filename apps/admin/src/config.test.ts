import { ConfigError } from '@relayplane/shared/config';
import { describe, expect, it } from 'vitest';
import { readAdminConfig } from './config.ts';

const base = {
  ADMIN_DATABASE_URL: 'postgres://db/admin',
  RELAYPLANE_KEK: Buffer.alloc(32, 1).toString('base64'),
};

function configError(env: Record<string, string>): ConfigError {
  try {
    readAdminConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('readAdminConfig', () => {
  it('applies the documented defaults', () => {
    const config = readAdminConfig(base);
    expect(config).toMatchObject({
      listen: '127.0.0.1:50052',
      billingAddress: '127.0.0.1:50053',
      sessionTtlSeconds: 43_200,
      signupEnabled: true,
      bootstrap: undefined,
      redis: undefined,
      logLevel: 'info',
      database: { kind: 'postgres', url: 'postgres://db/admin', poolMax: 10 },
    });
  });

  it('reads the login limits, defaulting to 10 per account and IP, 100 per account, 50 per IP in a 900 s window', () => {
    expect(readAdminConfig(base).loginLimits).toEqual({
      maxPerAccountAndIp: 10,
      maxPerAccount: 100,
      maxPerIp: 50,
      maxPerDevice: 10,
      slowSeconds: 10,
      windowSeconds: 900,
    });
    expect(
      readAdminConfig({
        ...base,
        ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP: '3',
        ADMIN_LOGIN_MAX_PER_ACCOUNT: '5',
        ADMIN_LOGIN_MAX_PER_IP: '100',
        ADMIN_LOGIN_WINDOW_SECONDS: '60',
        ADMIN_LOGIN_MAX_PER_DEVICE: '4',
        ADMIN_LOGIN_SLOW_SECONDS: '2',
      }).loginLimits,
    ).toEqual({
      maxPerAccountAndIp: 3,
      maxPerAccount: 5,
      maxPerIp: 100,
      maxPerDevice: 4,
      slowSeconds: 2,
      windowSeconds: 60,
    });
    for (const variable of [
      'ADMIN_LOGIN_MAX_PER_ACCOUNT_AND_IP',
      'ADMIN_LOGIN_MAX_PER_ACCOUNT',
      'ADMIN_LOGIN_MAX_PER_IP',
      'ADMIN_LOGIN_MAX_PER_DEVICE',
      'ADMIN_LOGIN_SLOW_SECONDS',
      'ADMIN_LOGIN_WINDOW_SECONDS',
    ]) {
      for (const bad of ['0', 'soon', '-1']) {
        expect(configError({ ...base, [variable]: bad }).variable).toBe(variable);
      }
    }
  });

  it('reads the sign-up limit, defaulting to 10 per client IP in a 3600 s window', () => {
    expect(readAdminConfig(base).signupLimits).toEqual({ maxPerIp: 10, windowSeconds: 3_600 });
    expect(
      readAdminConfig({ ...base, ADMIN_SIGNUP_MAX_PER_IP: '2', ADMIN_SIGNUP_WINDOW_SECONDS: '60' })
        .signupLimits,
    ).toEqual({ maxPerIp: 2, windowSeconds: 60 });
    for (const variable of ['ADMIN_SIGNUP_MAX_PER_IP', 'ADMIN_SIGNUP_WINDOW_SECONDS']) {
      for (const bad of ['0', 'hourly', '-1']) {
        expect(configError({ ...base, [variable]: bad }).variable).toBe(variable);
      }
    }
    expect(configError({ ...base, ADMIN_SIGNUP_WINDOW_SECONDS: '86401' }).variable).toBe(
      'ADMIN_SIGNUP_WINDOW_SECONDS',
    );
  });

  it('falls back to DATABASE_URL', () => {
    expect(
      readAdminConfig({ ...base, DATABASE_URL: 'postgres://db/all', ADMIN_DATABASE_URL: undefined }).database,
    ).toMatchObject({
      url: 'postgres://db/all',
    });
  });

  it('reads ADMIN_REDIS_URL with the default prefix', () => {
    expect(readAdminConfig({ ...base, ADMIN_REDIS_URL: 'redis://cache:6379' }).redis).toEqual({
      url: 'redis://cache:6379',
      prefix: 'relayplane:',
    });
  });

  it('falls back to REDIS_URL and RELAYPLANE_REDIS_PREFIX; ADMIN_ values win', () => {
    const shared = { ...base, REDIS_URL: 'redis://shared:6379', RELAYPLANE_REDIS_PREFIX: 'rp:' };
    expect(readAdminConfig(shared).redis).toEqual({ url: 'redis://shared:6379', prefix: 'rp:' });
    expect(
      readAdminConfig({ ...shared, ADMIN_REDIS_URL: 'rediss://own:6380', ADMIN_REDIS_PREFIX: 'adm:' }).redis,
    ).toEqual({ url: 'rediss://own:6380', prefix: 'adm:' });
  });

  it('keeps audit events 400 days unless RELAYPLANE_AUDIT_RETENTION_DAYS says otherwise', () => {
    expect(readAdminConfig(base).auditRetentionDays).toBe(400);
    expect(readAdminConfig({ ...base, RELAYPLANE_AUDIT_RETENTION_DAYS: '30' }).auditRetentionDays).toBe(30);
    for (const bad of ['0', '-1', 'forever', '36501']) {
      expect(configError({ ...base, RELAYPLANE_AUDIT_RETENTION_DAYS: bad }).variable).toBe(
        'RELAYPLANE_AUDIT_RETENTION_DAYS',
      );
    }
  });

  it('reads the per-bot limits, defaulting to 10 keys and 100 identity tokens', () => {
    expect(readAdminConfig(base).perBotLimits).toEqual({ maxActiveKeys: 10, maxActiveIdentityTokens: 100 });
    expect(
      readAdminConfig({
        ...base,
        ADMIN_MAX_ACTIVE_KEYS_PER_BOT: '3',
        ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT: '7',
      }).perBotLimits,
    ).toEqual({ maxActiveKeys: 3, maxActiveIdentityTokens: 7 });
    expect(() => readAdminConfig({ ...base, ADMIN_MAX_ACTIVE_KEYS_PER_BOT: '0' })).toThrow(
      /ADMIN_MAX_ACTIVE_KEYS_PER_BOT/,
    );
  });

  it('rejects a Redis URL that is not redis: or rediss:, naming the variable', () => {
    expect(configError({ ...base, ADMIN_REDIS_URL: 'http://cache:6379' }).variable).toBe('ADMIN_REDIS_URL');
  });

  it('reads a Redis Cluster from ADMIN_REDIS_CLUSTER_NODES, and refuses it beside ADMIN_REDIS_URL', () => {
    expect(
      readAdminConfig({
        ...base,
        REDIS_URL: 'redis://shared:6379',
        ADMIN_REDIS_CLUSTER_NODES: 'r0:7000,r1:7000',
      }).redis,
    ).toEqual({
      clusterNodes: [
        { host: 'r0', port: 7000 },
        { host: 'r1', port: 7000 },
      ],
      prefix: 'relayplane:',
    });
    const both = configError({
      ...base,
      ADMIN_REDIS_URL: 'redis://own:6379',
      ADMIN_REDIS_CLUSTER_NODES: 'r0:7000',
    });
    expect(both.variable).toBe('ADMIN_REDIS_CLUSTER_NODES');
    expect(both.message).toContain('ADMIN_REDIS_URL');
  });

  it('lets the composition root turn Redis off whatever the environment says', () => {
    expect(readAdminConfig({ ...base, REDIS_URL: 'redis://shared:6379' }, { redis: undefined }).redis).toBe(
      undefined,
    );
  });

  it('reads a bootstrap owner with a normalised email and the default tenant and plan', () => {
    const config = readAdminConfig({
      ...base,
      RELAYPLANE_BOOTSTRAP_EMAIL: 'Owner@Example.com',
      RELAYPLANE_BOOTSTRAP_PASSWORD: 'correct horse battery',
    });
    expect(config.bootstrap).toEqual({
      email: 'owner@example.com',
      password: 'correct horse battery',
      tenantName: 'default',
      plan: 'enterprise',
    });
  });

  it('names the missing half of a bootstrap email/password pair', () => {
    expect(configError({ ...base, RELAYPLANE_BOOTSTRAP_EMAIL: 'o@example.com' }).variable).toBe(
      'RELAYPLANE_BOOTSTRAP_PASSWORD',
    );
    expect(configError({ ...base, RELAYPLANE_BOOTSTRAP_PASSWORD: 'x'.repeat(16) }).variable).toBe(
      'RELAYPLANE_BOOTSTRAP_EMAIL',
    );
  });

  it.each([
    ['ADMIN_SESSION_TTL_SECONDS', '299'],
    ['ADMIN_SESSION_TTL_SECONDS', '2592001'],
    ['RELAYPLANE_BOOTSTRAP_PLAN', 'platinum'],
    ['RELAYPLANE_SIGNUP_ENABLED', 'maybe'],
    ['ADMIN_BILLING_ADDRESS', 'billing'],
  ])('rejects %s=%s naming the variable', (variable, value) => {
    expect(configError({ ...base, [variable]: value }).variable).toBe(variable);
  });

  it('rejects a bootstrap password shorter than the password policy', () => {
    const err = configError({
      ...base,
      RELAYPLANE_BOOTSTRAP_EMAIL: 'o@example.com',
      RELAYPLANE_BOOTSTRAP_PASSWORD: 'short',
    });
    expect(err.variable).toBe('RELAYPLANE_BOOTSTRAP_PASSWORD');
    expect(err.message).not.toContain('short');
  });

  it('lets the composition root pass the bootstrap owner as an override', () => {
    const bootstrap = {
      email: 'e@example.com',
      password: 'x'.repeat(20),
      tenantName: 't',
      plan: 'pro' as const,
    };
    expect(readAdminConfig(base, { bootstrap }).bootstrap).toBe(bootstrap);
    expect(
      readAdminConfig(
        {
          ...base,
          RELAYPLANE_BOOTSTRAP_EMAIL: 'o@example.com',
          RELAYPLANE_BOOTSTRAP_PASSWORD: 'x'.repeat(16),
        },
        { bootstrap: undefined },
      ).bootstrap,
    ).toBeUndefined();
  });
});
