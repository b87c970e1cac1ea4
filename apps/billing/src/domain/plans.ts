/** Plans and prices: the catalogue is configuration, validated here. Pure. */
import { DEFAULT_PLAN, isPlanId, PLAN_IDS, PLANS, type PlanId } from '@relayplane/contract/contract';

export interface PlanLimits {
  maxConcurrentConnections: number;
  maxApiKeys: number;
  maxProjects: number;
  maxBots: number;
  maxAllowlistEntries: number;
  /** Webhook endpoints per project (issue 34). */
  maxWebhookEndpoints: number;
  maxCredentialTtlSeconds: number;
  /**
   * Credential issuance attempts per API key per second (`max_issuance_per_second_per_key`),
   * counted across every gateway; refused attempts count too. Over it: 429 + Retry-After.
   */
  maxIssuancePerSecondPerKey: number;
}

export interface Price {
  currency: string;
  monthlyAmountMinor: number;
  contactSales: boolean;
}

export interface Plan {
  id: PlanId;
  name: string;
  limits: PlanLimits;
  price: Price;
  /** The Stripe price a checkout for this plan subscribes to (`stripe_price_id`); absent: not sold through Stripe. */
  stripePriceId?: string;
  /**
   * The Stripe meter (`event_name`) this plan's overage is billed through
   * (`stripe_meter_event_name`): with the Stripe provider, each completed UTC day's credentials
   * issued are reported to it. Absent: no metered usage. Ignored by the built-in provider.
   */
  stripeMeterEventName?: string;
  /**
   * The Stripe meters relay-session usage is billed through (`stripe_usage_meters`): each
   * completed UTC day's session minutes, bytes sent and bytes received, each to its meter where
   * one is named. Ignored by the built-in provider.
   */
  stripeUsageMeters?: Partial<Record<SessionUsageMeter, string>>;
  /**
   * How often relays revalidate this plan's relay sessions, in seconds
   * (`relay_session_revalidate_seconds`, 1..3600); absent: the issuer's default
   * (RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS). A shorter cadence ends a revoked session sooner
   * and costs a decision per session per cadence.
   */
  relaySessionRevalidateSeconds?: number;
}

/** The bounds of `relay_session_revalidate_seconds` (the issuer's own setting has the same). */
export const RELAY_SESSION_REVALIDATE_SECONDS = { min: 1, max: 3_600 } as const;

/** Relay-session usage a plan may bill through a Stripe meter of its own. */
export const SESSION_USAGE_METERS = ['session_minutes', 'bytes_sent', 'bytes_received'] as const;
export type SessionUsageMeter = (typeof SESSION_USAGE_METERS)[number];

/** Built-in defaults, used when RELAYPLANE_PLANS_FILE is not set; a file overrides per field. */
export const DEFAULT_PLANS: Record<PlanId, Plan> = {
  [PLANS.free]: {
    id: PLANS.free,
    name: 'Free',
    limits: {
      maxConcurrentConnections: 10,
      maxApiKeys: 2,
      maxProjects: 2,
      maxBots: 2,
      maxAllowlistEntries: 3,
      maxWebhookEndpoints: 2,
      maxCredentialTtlSeconds: 900,
      maxIssuancePerSecondPerKey: 20,
    },
    price: { currency: 'usd', monthlyAmountMinor: 0, contactSales: false },
  },
  [PLANS.pro]: {
    id: PLANS.pro,
    name: 'Pro',
    limits: {
      maxConcurrentConnections: 1_000,
      maxApiKeys: 25,
      maxProjects: 25,
      maxBots: 100,
      maxAllowlistEntries: 100,
      maxWebhookEndpoints: 10,
      maxCredentialTtlSeconds: 3_600,
      maxIssuancePerSecondPerKey: 200,
    },
    price: { currency: 'usd', monthlyAmountMinor: 4_900, contactSales: false },
  },
  [PLANS.enterprise]: {
    id: PLANS.enterprise,
    name: 'Enterprise',
    limits: {
      maxConcurrentConnections: 100_000,
      maxApiKeys: 1_000,
      maxProjects: 1_000,
      maxBots: 10_000,
      maxAllowlistEntries: 1_000,
      maxWebhookEndpoints: 100,
      maxCredentialTtlSeconds: 3_600,
      maxIssuancePerSecondPerKey: 2_000,
    },
    price: { currency: 'usd', monthlyAmountMinor: 0, contactSales: true },
  },
};

const LIMIT_FIELDS: Record<keyof PlanLimits, { file: string; min: number; max: number }> = {
  maxConcurrentConnections: { file: 'max_concurrent_connections', min: 0, max: 10_000_000 },
  maxApiKeys: { file: 'max_api_keys', min: 0, max: 1_000_000 },
  maxProjects: { file: 'max_projects', min: 0, max: 1_000_000 },
  maxBots: { file: 'max_bots', min: 0, max: 1_000_000 },
  maxAllowlistEntries: { file: 'max_allowlist_entries', min: 0, max: 100_000 },
  maxWebhookEndpoints: { file: 'max_webhook_endpoints', min: 0, max: 1_000 },
  maxCredentialTtlSeconds: { file: 'max_credential_ttl_seconds', min: 60, max: 3_600 },
  // At least 1: a plan that may issue nothing is not a rate (and would answer 429 forever).
  maxIssuancePerSecondPerKey: { file: 'max_issuance_per_second_per_key', min: 1, max: 1_000_000 },
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function intIn(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
}

/** What `stripe_meter_event_name` accepts (a Stripe meter's event name). */
const STRIPE_METER_EVENT_NAME = /^[a-z0-9_]{1,100}$/;

/**
 * Validates a plans document (parsed YAML/JSON) and merges it over the defaults.
 * Shape: `{ plans: { free: { name?, limits?: {max_projects?, ...}, price?: {currency?, monthly_amount_minor?, contact_sales?}, stripe_price_id?, stripe_meter_event_name?, stripe_usage_meters?: {session_minutes?, bytes_sent?, bytes_received?}, relay_session_revalidate_seconds? } } }`.
 * Throws an Error whose message names the offending path.
 */
export function resolvePlans(doc: unknown): Record<PlanId, Plan> {
  if (!isRecord(doc)) throw new Error('must be a mapping with a "plans" key');
  const unknownTop = Object.keys(doc).filter((k) => k !== 'plans');
  if (unknownTop.length) throw new Error(`unknown key(s) ${unknownTop.join(', ')}`);
  const plans = doc.plans;
  if (!isRecord(plans)) throw new Error('plans: must be a mapping of plan id to plan');
  const out = structuredClone(DEFAULT_PLANS);
  for (const [id, raw] of Object.entries(plans)) {
    if (!isPlanId(id)) throw new Error(`plans.${id}: unknown plan (known: ${PLAN_IDS.join(', ')})`);
    const plan = out[id];
    if (!isRecord(raw)) throw new Error(`plans.${id}: must be a mapping`);
    for (const key of Object.keys(raw)) {
      if (
        ![
          'name',
          'limits',
          'price',
          'stripe_price_id',
          'stripe_meter_event_name',
          'stripe_usage_meters',
          'relay_session_revalidate_seconds',
        ].includes(key)
      ) {
        throw new Error(`plans.${id}.${key}: unknown key`);
      }
    }
    if (raw.stripe_price_id !== undefined) {
      if (typeof raw.stripe_price_id !== 'string' || !/^[A-Za-z0-9_]{1,255}$/.test(raw.stripe_price_id)) {
        throw new Error(`plans.${id}.stripe_price_id: must be a Stripe price id (for example price_123)`);
      }
      plan.stripePriceId = raw.stripe_price_id;
    }
    if (raw.stripe_meter_event_name !== undefined) {
      if (
        typeof raw.stripe_meter_event_name !== 'string' ||
        !STRIPE_METER_EVENT_NAME.test(raw.stripe_meter_event_name)
      ) {
        throw new Error(
          `plans.${id}.stripe_meter_event_name: must be a Stripe meter event name (1-100 of a-z, 0-9, _; for example relay_credentials)`,
        );
      }
      plan.stripeMeterEventName = raw.stripe_meter_event_name;
    }
    if (raw.relay_session_revalidate_seconds !== undefined) {
      const value = raw.relay_session_revalidate_seconds;
      const { min, max } = RELAY_SESSION_REVALIDATE_SECONDS;
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
        throw new Error(
          `plans.${id}.relay_session_revalidate_seconds: must be a whole number of seconds, ${min}..${max}`,
        );
      }
      plan.relaySessionRevalidateSeconds = value;
    }
    if (raw.stripe_usage_meters !== undefined) {
      const meters = raw.stripe_usage_meters;
      if (!isRecord(meters)) throw new Error(`plans.${id}.stripe_usage_meters: must be a mapping`);
      const out: Partial<Record<SessionUsageMeter, string>> = {};
      for (const [meter, name] of Object.entries(meters)) {
        if (!(SESSION_USAGE_METERS as readonly string[]).includes(meter)) {
          throw new Error(
            `plans.${id}.stripe_usage_meters.${meter}: unknown meter (known: ${SESSION_USAGE_METERS.join(', ')})`,
          );
        }
        if (typeof name !== 'string' || !STRIPE_METER_EVENT_NAME.test(name)) {
          throw new Error(
            `plans.${id}.stripe_usage_meters.${meter}: must be a Stripe meter event name (1-100 of a-z, 0-9, _; for example relay_session_minutes)`,
          );
        }
        out[meter as SessionUsageMeter] = name;
      }
      plan.stripeUsageMeters = out;
    }
    if (raw.name !== undefined) {
      if (typeof raw.name !== 'string' || raw.name.length === 0 || raw.name.length > 64) {
        throw new Error(`plans.${id}.name: must be a string of 1-64 characters`);
      }
      plan.name = raw.name;
    }
    if (raw.limits !== undefined) {
      if (!isRecord(raw.limits)) throw new Error(`plans.${id}.limits: must be a mapping`);
      const byFile = new Map(Object.entries(LIMIT_FIELDS).map(([k, v]) => [v.file, { key: k, ...v }]));
      for (const [fileKey, value] of Object.entries(raw.limits)) {
        const field = byFile.get(fileKey);
        if (!field) throw new Error(`plans.${id}.limits.${fileKey}: unknown limit`);
        if (!intIn(value, field.min, field.max)) {
          throw new Error(
            `plans.${id}.limits.${fileKey}: must be an integer between ${field.min} and ${field.max}`,
          );
        }
        plan.limits[field.key as keyof PlanLimits] = value;
      }
    }
    if (raw.price !== undefined) {
      const p = raw.price;
      if (!isRecord(p)) throw new Error(`plans.${id}.price: must be a mapping`);
      for (const [key, value] of Object.entries(p)) {
        if (key === 'currency') {
          if (typeof value !== 'string' || !/^[a-z]{3}$/.test(value)) {
            throw new Error(`plans.${id}.price.currency: must be a lowercase ISO 4217 code`);
          }
          plan.price.currency = value;
        } else if (key === 'monthly_amount_minor') {
          if (!intIn(value, 0, 100_000_000)) {
            throw new Error(`plans.${id}.price.monthly_amount_minor: must be a non-negative integer`);
          }
          plan.price.monthlyAmountMinor = value;
        } else if (key === 'contact_sales') {
          if (typeof value !== 'boolean')
            throw new Error(`plans.${id}.price.contact_sales: must be true or false`);
          plan.price.contactSales = value;
        } else {
          throw new Error(`plans.${id}.price.${key}: unknown key`);
        }
      }
    }
  }
  return out;
}

/** The plan a tenant is on: its subscription's, or the default plan without one. */
export function planIdOf(subscription: { planId: string } | undefined): PlanId {
  return subscription && isPlanId(subscription.planId) ? subscription.planId : DEFAULT_PLAN;
}

/**
 * Whether a plan is paid: a monthly price above 0, or sold by contact with sales (the default
 * `enterprise`: price 0 in the catalogue, but never free). Decided from the plan data alone, so
 * a plans file that prices a plan makes it paid, and the default `free` (0, not contact sales)
 * is the one plan the built-in provider checks out while paid checkout is off.
 */
export function isPaidPlan(plan: Plan): boolean {
  return plan.price.monthlyAmountMinor > 0 || plan.price.contactSales;
}
