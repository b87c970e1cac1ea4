export { BILLING_PROVIDERS, type BillingConfig, loadPlansFile, readBillingConfig } from './config.ts';
export { DEFAULT_PLANS, PLAN_IDS, type Plan, type PlanId } from './domain/plans.ts';
export { PLANS_CHANGED_CHANNEL } from './plan-changes.ts';
export { type BillingOverrides, BillingService } from './service.ts';
