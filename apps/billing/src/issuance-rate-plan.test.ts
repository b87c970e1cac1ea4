/**
 * `max_issuance_per_second_per_key` in the plans file: the defaults, an override, and every bad
 * value refused through the plans file's own error path (a ConfigError naming
 * RELAYPLANE_PLANS_FILE, which stops the process with exit 78 at start, and a message naming
 * the key's path).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@relayplane/shared/config';
import { describe, expect, it } from 'vitest';
import { readBillingConfig } from './config.ts';
import { entitlementsOf } from './domain/entitlements.ts';

const BASE = { BILLING_DATABASE_URL: 'postgres://localhost/billing' };

function withPlans(content: string): Record<string, string> {
  const path = join(mkdtempSync(join(tmpdir(), 'billing-rate-')), 'plans.yaml');
  writeFileSync(path, content);
  return { ...BASE, RELAYPLANE_PLANS_FILE: path };
}

function configError(env: Record<string, string>): ConfigError {
  try {
    readBillingConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('the configuration was accepted');
}

describe('max_issuance_per_second_per_key in the plans file', () => {
  it('defaults to 20 (free), 200 (pro) and 2000 (enterprise) per API key per second', () => {
    const { plans } = readBillingConfig(BASE);
    expect({
      free: plans.free.limits.maxIssuancePerSecondPerKey,
      pro: plans.pro.limits.maxIssuancePerSecondPerKey,
      enterprise: plans.enterprise.limits.maxIssuancePerSecondPerKey,
    }).toEqual({ free: 20, pro: 200, enterprise: 2_000 });
  });

  it('takes a value per plan, leaving the other plans and limits at their defaults', () => {
    const { plans } = readBillingConfig(
      withPlans('plans:\n  pro:\n    limits: { max_issuance_per_second_per_key: 50 }\n'),
    );
    expect(plans.pro.limits.maxIssuancePerSecondPerKey).toBe(50);
    expect(plans.pro.limits.maxConcurrentConnections).toBe(1_000);
    expect(plans.free.limits.maxIssuancePerSecondPerKey).toBe(20);
    const rate = entitlementsOf(plans.pro).entitlements.find(
      (e) => e.limit === 'max_issuance_per_second_per_key',
    );
    expect(rate).toEqual({
      limit: 'max_issuance_per_second_per_key',
      value: 50,
      exceededCode: 'rate_limited',
      exceededMessage:
        'rate limit exceeded: the pro plan allows at most 50 credential requests per second per API key, refused ones included (max_issuance_per_second_per_key); retry after the Retry-After delay',
    });
  });

  it('accepts the bounds 1 and 1000000', () => {
    for (const value of [1, 1_000_000]) {
      const { plans } = readBillingConfig(
        withPlans(`plans:\n  free:\n    limits: { max_issuance_per_second_per_key: ${value} }\n`),
      );
      expect(plans.free.limits.maxIssuancePerSecondPerKey).toBe(value);
    }
  });

  it.each([
    ['0', '0'],
    ['a negative number', '-5'],
    ['a fraction', '2.5'],
    ['a string', '"fast"'],
    ['above 1000000', '1000001'],
    ['null', 'null'],
  ])('refuses %s through the plans-file error path, naming the key', (_what, value) => {
    const err = configError(
      withPlans(`plans:\n  enterprise:\n    limits: { max_issuance_per_second_per_key: ${value} }\n`),
    );
    expect(err.variable).toBe('RELAYPLANE_PLANS_FILE');
    expect(err.message).toContain(
      'plans.enterprise.limits.max_issuance_per_second_per_key: must be an integer between 1 and 1000000',
    );
  });

  it('refuses a misspelt key as an unknown limit', () => {
    const err = configError(withPlans('plans:\n  free:\n    limits: { max_issuance_per_second: 5 }\n'));
    expect(err.variable).toBe('RELAYPLANE_PLANS_FILE');
    expect(err.message).toContain('plans.free.limits.max_issuance_per_second: unknown limit');
  });
});
