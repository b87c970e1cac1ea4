import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@relayplane/shared/config';
import { describe, expect, it } from 'vitest';
import { readBillingConfig } from './config.ts';
import { entitlementsOf } from './domain/entitlements.ts';

const BASE = { BILLING_DATABASE_URL: 'postgres://localhost/billing' };

function plansFile(content: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'billing-config-')), 'plans.yaml');
  writeFileSync(path, content);
  return path;
}

const STRIPE = {
  ...BASE,
  BILLING_PROVIDER: 'stripe',
  STRIPE_SECRET_KEY: 'sk_test_abc123',
  STRIPE_WEBHOOK_SECRET: 'whsec_abc123',
};

function failsOn(env: Record<string, string>, variable: string): void {
  let error: unknown;
  try {
    readBillingConfig(env);
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).variable).toBe(variable);
}

describe('billing config', () => {
  it('defaults to the built-in provider, no Redis, 5 checkouts per 60 s and the local issuer', () => {
    const config = readBillingConfig(BASE);
    expect(config.provider).toEqual({ kind: 'builtin', paidCheckout: false });
    expect(config.redis).toBeUndefined();
    expect(config.checkout).toEqual({ maxPerWindow: 5, windowSeconds: 60, sessionTtlSeconds: 86_400 });
    expect(config.issuerAddress).toBe('127.0.0.1:50051');
  });

  it('reads Redis from BILLING_REDIS_URL or REDIS_URL with the shared prefix', () => {
    expect(
      readBillingConfig({ ...BASE, REDIS_URL: 'redis://r:6379', RELAYPLANE_REDIS_PREFIX: 'x:' }).redis,
    ).toEqual({
      url: 'redis://r:6379',
      prefix: 'x:',
    });
    failsOn({ ...BASE, BILLING_REDIS_URL: 'http://r' }, 'BILLING_REDIS_URL');
  });

  it('reads the Stripe provider with its API base, and names each bad variable', () => {
    const path = plansFile('plans:\n  pro:\n    stripe_price_id: price_pro\n');
    const config = readBillingConfig({
      ...STRIPE,
      RELAYPLANE_PLANS_FILE: path,
      STRIPE_API_BASE: 'http://127.0.0.1:12111',
    });
    expect(config.provider).toEqual({
      kind: 'stripe',
      secretKey: 'sk_test_abc123',
      webhookSecret: 'whsec_abc123',
      webhookToleranceSeconds: 300,
      apiBase: { protocol: 'http', host: '127.0.0.1', port: 12111 },
    });
    expect(config.plans.pro.stripePriceId).toBe('price_pro');
    failsOn({ ...STRIPE, RELAYPLANE_PLANS_FILE: path, STRIPE_SECRET_KEY: '' }, 'STRIPE_SECRET_KEY');
    failsOn({ ...STRIPE, RELAYPLANE_PLANS_FILE: path, STRIPE_SECRET_KEY: 'pk_test_1' }, 'STRIPE_SECRET_KEY');
    failsOn(
      { ...STRIPE, RELAYPLANE_PLANS_FILE: path, STRIPE_WEBHOOK_SECRET: 'nope' },
      'STRIPE_WEBHOOK_SECRET',
    );
    failsOn({ ...STRIPE, RELAYPLANE_PLANS_FILE: path, STRIPE_API_BASE: 'ftp://x' }, 'STRIPE_API_BASE');
    failsOn(
      { ...STRIPE, RELAYPLANE_PLANS_FILE: path, STRIPE_WEBHOOK_TOLERANCE_SECONDS: '0' },
      'STRIPE_WEBHOOK_TOLERANCE_SECONDS',
    );
    // Stripe without any priced plan cannot sell anything.
    failsOn(STRIPE, 'RELAYPLANE_PLANS_FILE');
    failsOn(
      { ...BASE, RELAYPLANE_PLANS_FILE: plansFile('plans:\n  pro:\n    stripe_price_id: 12\n') },
      'RELAYPLANE_PLANS_FILE',
    );
  });

  it('reads BILLING_BUILTIN_PAID_CHECKOUT (off by default), validated whatever the provider', () => {
    expect(readBillingConfig({ ...BASE, BILLING_BUILTIN_PAID_CHECKOUT: 'true' }).provider).toEqual({
      kind: 'builtin',
      paidCheckout: true,
    });
    expect(readBillingConfig({ ...BASE, BILLING_BUILTIN_PAID_CHECKOUT: 'false' }).provider).toEqual({
      kind: 'builtin',
      paidCheckout: false,
    });
    failsOn({ ...BASE, BILLING_BUILTIN_PAID_CHECKOUT: 'sometimes' }, 'BILLING_BUILTIN_PAID_CHECKOUT');
    // Stripe takes payment: the setting means nothing there, but a typo still stops the process.
    const path = plansFile('plans:\n  pro:\n    stripe_price_id: price_pro\n');
    const stripe = readBillingConfig({
      ...STRIPE,
      RELAYPLANE_PLANS_FILE: path,
      BILLING_BUILTIN_PAID_CHECKOUT: 'true',
    });
    expect(stripe.provider).not.toHaveProperty('paidCheckout');
    failsOn(
      { ...STRIPE, RELAYPLANE_PLANS_FILE: path, BILLING_BUILTIN_PAID_CHECKOUT: 'yes please' },
      'BILLING_BUILTIN_PAID_CHECKOUT',
    );
  });

  it('validates the provider name, the throttle and the issuer address', () => {
    failsOn({ ...BASE, BILLING_PROVIDER: 'paypal' }, 'BILLING_PROVIDER');
    failsOn({ ...BASE, BILLING_CHECKOUT_MAX_PER_WINDOW: '0' }, 'BILLING_CHECKOUT_MAX_PER_WINDOW');
    failsOn({ ...BASE, BILLING_CHECKOUT_WINDOW_SECONDS: 'soon' }, 'BILLING_CHECKOUT_WINDOW_SECONDS');
    failsOn({ ...BASE, BILLING_CHECKOUT_SESSION_TTL_SECONDS: '60' }, 'BILLING_CHECKOUT_SESSION_TTL_SECONDS');
    failsOn({ ...BASE, BILLING_ISSUER_ADDRESS: 'issuer' }, 'BILLING_ISSUER_ADDRESS');
    expect(readBillingConfig({ ...BASE, BILLING_ISSUER_ADDRESS: 'dns:///issuer:50051' }).issuerAddress).toBe(
      'dns:///issuer:50051',
    );
  });

  it("reads BILLING_ADMIN_ADDRESS, the audit outbox's target (default 127.0.0.1:50052)", () => {
    expect(readBillingConfig(BASE).adminAddress).toBe('127.0.0.1:50052');
    failsOn({ ...BASE, BILLING_ADMIN_ADDRESS: 'admin' }, 'BILLING_ADMIN_ADDRESS');
    expect(
      readBillingConfig({ ...BASE, BILLING_ADMIN_ADDRESS: 'ipv4:10.0.0.1:50052,10.0.0.2:50052' })
        .adminAddress,
    ).toBe('ipv4:10.0.0.1:50052,10.0.0.2:50052');
  });

  it('reads BILLING_USAGE_INTERVAL_MS (default 5 minutes, 1 s to 1 day)', () => {
    expect(readBillingConfig(BASE).usageIntervalMs).toBe(300_000);
    expect(readBillingConfig({ ...BASE, BILLING_USAGE_INTERVAL_MS: '1000' }).usageIntervalMs).toBe(1_000);
    expect(readBillingConfig({ ...BASE, BILLING_USAGE_INTERVAL_MS: '86400000' }).usageIntervalMs).toBe(
      86_400_000,
    );
    failsOn({ ...BASE, BILLING_USAGE_INTERVAL_MS: '999' }, 'BILLING_USAGE_INTERVAL_MS');
    failsOn({ ...BASE, BILLING_USAGE_INTERVAL_MS: '86400001' }, 'BILLING_USAGE_INTERVAL_MS');
    failsOn({ ...BASE, BILLING_USAGE_INTERVAL_MS: '5m' }, 'BILLING_USAGE_INTERVAL_MS');
  });

  it('reads stripe_meter_event_name per plan and refuses a malformed one', () => {
    const path = plansFile(
      'plans:\n  pro:\n    stripe_price_id: price_pro\n    stripe_meter_event_name: relay_credentials\n',
    );
    const config = readBillingConfig({ ...STRIPE, RELAYPLANE_PLANS_FILE: path });
    expect(config.plans.pro.stripeMeterEventName).toBe('relay_credentials');
    expect(config.plans.free.stripeMeterEventName).toBeUndefined();
    // Accepted (and ignored) with the built-in provider: one plans file serves both.
    expect(readBillingConfig({ ...BASE, RELAYPLANE_PLANS_FILE: path }).plans.pro.stripeMeterEventName).toBe(
      'relay_credentials',
    );
    for (const bad of ['Relay-Credentials', "''", '12', 'x'.repeat(101)]) {
      failsOn(
        {
          ...BASE,
          RELAYPLANE_PLANS_FILE: plansFile(`plans:\n  pro:\n    stripe_meter_event_name: ${bad}\n`),
        },
        'RELAYPLANE_PLANS_FILE',
      );
    }
  });

  it('reads stripe_usage_meters per plan (relay-session minutes and bytes) and refuses unknown meters or bad names', () => {
    const path = plansFile(
      'plans:\n  pro:\n    stripe_price_id: price_pro\n    stripe_usage_meters:\n      session_minutes: relay_session_minutes\n      bytes_received: relay_ingress\n',
    );
    const config = readBillingConfig({ ...STRIPE, RELAYPLANE_PLANS_FILE: path });
    expect(config.plans.pro.stripeUsageMeters).toEqual({
      session_minutes: 'relay_session_minutes',
      bytes_received: 'relay_ingress',
    });
    expect(config.plans.free.stripeUsageMeters).toBeUndefined();
    for (const [bad, message] of [
      ['stripe_usage_meters: { sessions: relay_sessions }', /stripe_usage_meters\.sessions: unknown meter/],
      [
        'stripe_usage_meters: { bytes_sent: Bytes-Sent }',
        /stripe_usage_meters\.bytes_sent: must be a Stripe meter event name/,
      ],
      ['stripe_usage_meters: relay_minutes', /stripe_usage_meters: must be a mapping/],
    ] as const) {
      expect(() =>
        readBillingConfig({ ...BASE, RELAYPLANE_PLANS_FILE: plansFile(`plans:\n  pro:\n    ${bad}\n`) }),
      ).toThrow(message);
    }
  });

  it('reads relay_session_revalidate_seconds per plan (1..3600) and answers it with the entitlements', () => {
    const config = readBillingConfig({
      ...BASE,
      RELAYPLANE_PLANS_FILE: plansFile('plans:\n  pro:\n    relay_session_revalidate_seconds: 5\n'),
    });
    expect(config.plans.pro.relaySessionRevalidateSeconds).toBe(5);
    expect(entitlementsOf(config.plans.pro).relaySessionRevalidateSeconds).toBe(5);
    expect(entitlementsOf(config.plans.free).relaySessionRevalidateSeconds).toBe(0);
    for (const bad of ['0', '3601', '1.5', 'fast']) {
      expect(() =>
        readBillingConfig({
          ...BASE,
          RELAYPLANE_PLANS_FILE: plansFile(`plans:\n  pro:\n    relay_session_revalidate_seconds: ${bad}\n`),
        }),
      ).toThrow(/relay_session_revalidate_seconds: must be a whole number of seconds, 1\.\.3600/);
    }
  });
});
