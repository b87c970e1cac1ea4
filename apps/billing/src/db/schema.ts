import type { AuditOutboxTable } from '@relayplane/shared/audit-outbox';
import type { ColumnType, Generated } from 'kysely';
import type { CheckoutStatus } from '../domain/checkout.ts';

export interface SubscriptionsTable {
  tenant_id: string;
  plan_id: string;
  created_at: Generated<Date>;
  updated_at: Date;
  /** The tenant's Stripe customer (cus_…), from its checkout and subscription webhooks; null: none known. */
  stripe_customer_id: Generated<string | null>;
}

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

/** Per Stripe subscription, the last event applied to it (its order; src/domain/stripe-events.ts). */
export interface StripeSubscriptionsTable {
  subscription_id: string;
  tenant_id: string;
  /** The applied event's `created`. */
  last_event_at: Date;
  last_event_id: string;
  /** The subscription ended (deleted, or a status Stripe never leaves): nothing later is applied. */
  ended: boolean;
  updated_at: Date;
}

/**
 * One UTC day of usage per tenant and project (`project_id` '' is the tenant's total),
 * recomputed from the issuer and replaced as a whole day at a time.
 */
export interface UsageDailyTable {
  tenant_id: string;
  /** Empty: the whole tenant (its own peak, not the sum of its projects' peaks). */
  project_id: string;
  /** `date`; written as YYYY-MM-DD, read back with `to_char` (the pg driver would make a local-time Date). */
  day: ColumnType<Date | string, string, string>;
  /** int8: pg returns a string, PGlite may return a number or bigint. */
  credentials_issued: ColumnType<
    string | number | bigint,
    string | number | bigint,
    string | number | bigint
  >;
  peak_concurrent_connections: number;
  /** Relay sessions that ended that day, their seconds and bytes (int8 columns: strings from pg). */
  sessions_ended: ColumnType<string | number | bigint, string | undefined, string>;
  session_seconds: ColumnType<number | string, number | undefined, number>;
  bytes_sent: ColumnType<string | number | bigint, string | undefined, string>;
  bytes_received: ColumnType<string | number | bigint, string | undefined, string>;
  /** Taken before the issuer was asked: the rows cover at least everything up to it. */
  computed_at: Date;
}

/** One completed UTC day of a tenant reported to a Stripe meter (sent once: see providers/stripe-meter.ts). */
export interface MeteredUsageReportsTable {
  tenant_id: string;
  /** `date`; written as YYYY-MM-DD, read back with `to_char`. */
  day: ColumnType<Date | string, string, string>;
  /** What is reported: `credentials`, `session_minutes`, `bytes_sent` or `bytes_received` (UsageMeter). */
  meter: ColumnType<string, string | undefined, string>;
  event_name: string;
  stripe_customer_id: string;
  /** The reported value (that day's amount of the meter); int8. */
  value: ColumnType<string | number | bigint, string, string>;
  /** The meter event's `identifier` (`<tenant>:<day>`, `<tenant>:<day>:<meter>` for the others). */
  identifier: string;
  reported_at: Date;
}

export interface BillingDatabase {
  subscriptions: SubscriptionsTable;
  checkout_sessions: CheckoutSessionsTable;
  webhook_events: WebhookEventsTable;
  stripe_subscriptions: StripeSubscriptionsTable;
  usage_daily: UsageDailyTable;
  metered_usage_reports: MeteredUsageReportsTable;
  /** Audit events not yet delivered to admin (@relayplane/shared/audit-outbox). */
  audit_outbox: AuditOutboxTable;
}
