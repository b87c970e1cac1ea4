/**
 * Entitlements: the one place that decides, per plan limit, what a request exceeding it
 * answers. Pure.
 *
 * - The API key limit and the connection cap need a paid upgrade: `payment_required` (402).
 * - The feature limits (projects, bots, allowlist entries) are semantic refusals:
 *   `unprocessable` (422).
 * - A credential TTL above the plan's maximum is a bad request: `invalid_request` (400).
 * - The per-API-key issuance rate is the one rate among them: `rate_limited` (429, with
 *   Retry-After), because waiting is enough; the other limits never answer 429, which means
 *   "back off", not "upgrade".
 */
import type { ErrorCode } from '@relayplane/contract/errors';
import type { Plan, PlanLimits } from './plans.ts';

export type LimitName =
  | 'max_concurrent_connections'
  | 'max_api_keys'
  | 'max_projects'
  | 'max_bots'
  | 'max_allowlist_entries'
  | 'max_webhook_endpoints'
  | 'max_credential_ttl_seconds'
  | 'max_issuance_per_second_per_key';

export interface Entitlement {
  limit: LimitName;
  value: number;
  exceededCode: ErrorCode;
  exceededMessage: string;
}

export interface Entitlements {
  planId: string;
  planName: string;
  entitlements: Entitlement[];
  /** The plan's relay-session cadence in seconds; 0: the issuer's default. */
  relaySessionRevalidateSeconds: number;
}

function plural(n: number, one: string, many: string): string {
  return n === 1 ? one : many;
}

interface Rule {
  limit: LimitName;
  field: keyof PlanLimits;
  code: ErrorCode;
  /** "allows at most N <what>" */
  what: (n: number) => string;
  /** "upgrade the plan to <action>" */
  action: string;
}

/** In the order GetEntitlements answers them. */
const RULES: readonly Rule[] = [
  {
    limit: 'max_concurrent_connections',
    field: 'maxConcurrentConnections',
    code: 'payment_required',
    what: (n) => `${n} concurrent ${plural(n, 'connection', 'connections')}`,
    action: 'open more',
  },
  {
    limit: 'max_api_keys',
    field: 'maxApiKeys',
    code: 'payment_required',
    what: (n) => `${n} active API ${plural(n, 'key', 'keys')}`,
    action: 'create more',
  },
  {
    limit: 'max_projects',
    field: 'maxProjects',
    code: 'unprocessable',
    what: (n) => `${n} ${plural(n, 'project', 'projects')}`,
    action: 'create more',
  },
  {
    limit: 'max_bots',
    field: 'maxBots',
    code: 'unprocessable',
    what: (n) => `${n} ${plural(n, 'bot', 'bots')}`,
    action: 'create more',
  },
  {
    limit: 'max_allowlist_entries',
    field: 'maxAllowlistEntries',
    code: 'unprocessable',
    what: (n) => `${n} allowlist ${plural(n, 'entry', 'entries')} per project`,
    action: 'add more',
  },
  {
    limit: 'max_webhook_endpoints',
    field: 'maxWebhookEndpoints',
    code: 'unprocessable',
    what: (n) => `${n} webhook ${plural(n, 'endpoint', 'endpoints')} per project`,
    action: 'add more',
  },
];

/** Every limit of `plan`, with the code and message a request exceeding it answers. */
export function entitlementsOf(plan: Plan): Entitlements {
  const entitlements: Entitlement[] = RULES.map((rule) => {
    const value = plan.limits[rule.field];
    return {
      limit: rule.limit,
      value,
      exceededCode: rule.code,
      exceededMessage: `the ${plan.id} plan allows at most ${rule.what(value)} (${rule.limit}); upgrade the plan to ${rule.action}`,
    };
  });
  const ttl = plan.limits.maxCredentialTtlSeconds;
  entitlements.push({
    limit: 'max_credential_ttl_seconds',
    value: ttl,
    exceededCode: 'invalid_request',
    exceededMessage: `ttl_seconds exceeds the ${plan.id} plan's maximum of ${ttl} (max_credential_ttl_seconds); ask for a shorter ttl_seconds or upgrade the plan`,
  });
  const rate = plan.limits.maxIssuancePerSecondPerKey;
  entitlements.push({
    limit: 'max_issuance_per_second_per_key',
    value: rate,
    exceededCode: 'rate_limited',
    exceededMessage: `rate limit exceeded: the ${plan.id} plan allows at most ${rate} credential ${plural(rate, 'request', 'requests')} per second per API key, refused ones included (max_issuance_per_second_per_key); retry after the Retry-After delay`,
  });
  return {
    planId: plan.id,
    planName: plan.name,
    entitlements,
    relaySessionRevalidateSeconds: plan.relaySessionRevalidateSeconds ?? 0,
  };
}
