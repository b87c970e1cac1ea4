import type { ColumnType, Generated } from 'kysely';
import type { UsageDailyTable } from '../usage/schema.ts';

export interface SubscriptionsTable {
  tenant_id: string;
  plan_id: string;
  created_at: Generated<Date>;
  updated_at: Date;
  /** The tenant's Stripe customer (cus_…), from its checkout and subscription webhooks; null: none known. */
  stripe_customer_id: Generated<string | null>;
}

export type CheckoutStatus = 'open' | 'completed' | 'expired';

export interface CheckoutSessionsTable {
  id: string;
  tenant_id: string;
  plan_id: string;
  provider: string;
  status: CheckoutStatus;
  /** Empty while the provider call is in flight. */
  url: string;
  /** The provider's id for it (Stripe: cs_…); null for the built-in provider. */
  provider_reference: string | null;
  idempotency_key: string | null;
  created_at: Date;
  expires_at: Date;
  completed_at: Date | null;
}

export interface WebhookEventsTable {
  provider: string;
  event_id: string;
  event_type: string;
  received_at: Date;
}

/** One completed UTC day of a tenant reported to a Stripe meter (sent once: see usage/stripe-meter.ts). */
export interface MeteredUsageReportsTable {
  tenant_id: string;
  /** `date`; written as YYYY-MM-DD, read back with `to_char`. */
  day: ColumnType<Date | string, string, string>;
  event_name: string;
  stripe_customer_id: string;
  /** The reported value (credentials issued that day); int8. */
  value: ColumnType<string | number | bigint, string, string>;
  /** The meter event's `identifier` (`<tenant>:<day>`). */
  identifier: string;
  reported_at: Date;
}

export interface BillingDatabase {
  subscriptions: SubscriptionsTable;
  checkout_sessions: CheckoutSessionsTable;
  webhook_events: WebhookEventsTable;
  usage_daily: UsageDailyTable;
  metered_usage_reports: MeteredUsageReportsTable;
}
