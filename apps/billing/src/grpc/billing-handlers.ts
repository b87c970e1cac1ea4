import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { completeCheckoutSession } from './complete-checkout-session.ts';
import { createCheckoutSession } from './create-checkout-session.ts';
import type { BillingDeps } from './deps.ts';
import { getCheckoutSession } from './get-checkout-session.ts';
import { getEntitlements } from './get-entitlements.ts';
import { getPricing } from './get-pricing.ts';
import { getSubscription } from './get-subscription.ts';
import { getSubscriptions } from './get-subscriptions.ts';
import { getUsage } from './get-usage.ts';
import { handleWebhook } from './handle-webhook.ts';
import { listPlans } from './list-plans.ts';
import { setPlan } from './set-plan.ts';

export function billingHandlers(deps: BillingDeps): ServiceImpl<typeof BillingService> {
  return {
    listPlans: listPlans(deps),
    getPricing: getPricing(deps),
    getSubscription: getSubscription(deps),
    getSubscriptions: getSubscriptions(deps),
    setPlan: setPlan(deps),
    getEntitlements: getEntitlements(deps),
    createCheckoutSession: createCheckoutSession(deps),
    getCheckoutSession: getCheckoutSession(deps),
    completeCheckoutSession: completeCheckoutSession(deps),
    handleWebhook: handleWebhook(deps),
    getUsage: getUsage(deps),
  };
}
