import type { Generated } from 'kysely';

export interface SubscriptionsTable {
  tenant_id: string;
  plan_id: string;
  created_at: Generated<Date>;
  updated_at: Date;
}

export interface BillingDatabase {
  subscriptions: SubscriptionsTable;
}
