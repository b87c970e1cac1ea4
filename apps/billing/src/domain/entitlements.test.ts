import { PLAN_IDS } from '@relayplane/contract/contract';
import { describe, expect, it } from 'vitest';
import { entitlementsOf } from './entitlements.ts';
import { DEFAULT_PLANS } from './plans.ts';

describe('entitlements', () => {
  it.each(PLAN_IDS)('answers every limit of the %s plan with its configured value', (id) => {
    const plan = DEFAULT_PLANS[id];
    const { planId, planName, entitlements } = entitlementsOf(plan);
    expect(planId).toBe(id);
    expect(planName).toBe(plan.name);
    expect(Object.fromEntries(entitlements.map((e) => [e.limit, e.value]))).toEqual({
      max_concurrent_connections: plan.limits.maxConcurrentConnections,
      max_api_keys: plan.limits.maxApiKeys,
      max_projects: plan.limits.maxProjects,
      max_bots: plan.limits.maxBots,
      max_allowlist_entries: plan.limits.maxAllowlistEntries,
      max_webhook_endpoints: plan.limits.maxWebhookEndpoints,
      max_credential_ttl_seconds: plan.limits.maxCredentialTtlSeconds,
      max_issuance_per_second_per_key: plan.limits.maxIssuancePerSecondPerKey,
    });
  });

  it('answers 402 for the API key limit and the connection cap, 422 for feature limits, 400 for the TTL, 429 for the issuance rate', () => {
    const codes = Object.fromEntries(
      entitlementsOf(DEFAULT_PLANS.free).entitlements.map((e) => [e.limit, e.exceededCode]),
    );
    expect(codes).toEqual({
      max_concurrent_connections: 'payment_required',
      max_api_keys: 'payment_required',
      max_projects: 'unprocessable',
      max_bots: 'unprocessable',
      max_allowlist_entries: 'unprocessable',
      max_webhook_endpoints: 'unprocessable',
      max_credential_ttl_seconds: 'invalid_request',
      max_issuance_per_second_per_key: 'rate_limited',
    });
    // 429 means "back off": only the rate answers it, never a limit that needs an upgrade.
    expect(Object.entries(codes).filter(([, code]) => code === 'rate_limited')).toEqual([
      ['max_issuance_per_second_per_key', 'rate_limited'],
    ]);
  });

  it('names the limit and the plan in every message', () => {
    for (const id of PLAN_IDS) {
      for (const e of entitlementsOf(DEFAULT_PLANS[id]).entitlements) {
        expect(e.exceededMessage).toContain(`the ${id} plan`);
        expect(e.exceededMessage).toContain(`(${e.limit})`);
        expect(e.exceededMessage).toContain(String(e.value));
      }
    }
    const byLimit = new Map(
      entitlementsOf(DEFAULT_PLANS.free).entitlements.map((e) => [e.limit, e.exceededMessage]),
    );
    expect(byLimit.get('max_projects')).toBe(
      'the free plan allows at most 2 projects (max_projects); upgrade the plan to create more',
    );
    expect(byLimit.get('max_api_keys')).toBe(
      'the free plan allows at most 2 active API keys (max_api_keys); upgrade the plan to create more',
    );
    expect(byLimit.get('max_concurrent_connections')).toBe(
      'the free plan allows at most 10 concurrent connections (max_concurrent_connections); upgrade the plan to open more',
    );
    expect(byLimit.get('max_credential_ttl_seconds')).toBe(
      "ttl_seconds exceeds the free plan's maximum of 900 (max_credential_ttl_seconds); ask for a shorter ttl_seconds or upgrade the plan",
    );
    expect(byLimit.get('max_issuance_per_second_per_key')).toBe(
      'rate limit exceeded: the free plan allows at most 20 credential requests per second per API key, refused ones included (max_issuance_per_second_per_key); retry after the Retry-After delay',
    );
  });

  it('uses the singular for a limit of one', () => {
    const plan = structuredClone(DEFAULT_PLANS.free);
    plan.limits.maxBots = 1;
    plan.limits.maxAllowlistEntries = 1;
    const byLimit = new Map(entitlementsOf(plan).entitlements.map((e) => [e.limit, e.exceededMessage]));
    expect(byLimit.get('max_bots')).toContain('at most 1 bot (max_bots)');
    expect(byLimit.get('max_allowlist_entries')).toContain('at most 1 allowlist entry per project');
  });
});
