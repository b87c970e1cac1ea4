export { type BillingConfig, readBillingConfig } from './config.ts';
export { type BillingOverrides, BillingService } from './service.ts';
