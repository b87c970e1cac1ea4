export { type BillingConfig, readBillingConfig, loadPlansFile } from './config.ts';
export { BillingService, type BillingOverrides } from './service.ts';
export { type Plan, type PlanId, PLAN_IDS, DEFAULT_PLANS } from './domain/plans.ts';
