import type { Migration } from 'kysely/migration';
import * as subscriptions from './20261122T1900-subscriptions.ts';
import * as checkoutSessions from './20261122T2200-checkout-sessions.ts';
import * as usageDaily from './20261123T1100-usage-daily.ts';
import * as stripeMetering from './20261123T1300-stripe-metering.ts';
import * as auditOutbox from './20261129T1000-audit-outbox.ts';
import * as stripeSubscriptionOrder from './20261130T0100-stripe-subscription-order.ts';
import * as usageSessions from './20261202T1000-usage-sessions.ts';
import * as meteredUsageMeters from './20261204T1000-metered-usage-meters.ts';

/** Every migration of the billing schema, by name (applied in name order). */
export const migrations: Record<string, Migration> = {
  '20261122T1900-subscriptions': subscriptions,
  '20261122T2200-checkout-sessions': checkoutSessions,
  '20261123T1100-usage-daily': usageDaily,
  '20261123T1300-stripe-metering': stripeMetering,
  '20261129T1000-audit-outbox': auditOutbox,
  '20261130T0100-stripe-subscription-order': stripeSubscriptionOrder,
  '20261202T1000-usage-sessions': usageSessions,
  '20261204T1000-metered-usage-meters': meteredUsageMeters,
};
