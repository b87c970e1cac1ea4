import type { Generated } from 'kysely';
import type { UsageDailyTable } from '../usage/schema.ts';

export interface SubscriptionsTable {
  tenant_id: string;
  plan_id: string;
  created_at: Generated<Date>;
  updated_at: Date;
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

export interface BillingDatabase {
  subscriptions: SubscriptionsTable;
  checkout_sessions: CheckoutSessionsTable;
  webhook_events: WebhookEventsTable;
  usage_daily: UsageDailyTable;
}
