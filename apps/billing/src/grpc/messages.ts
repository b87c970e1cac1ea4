/** The billing service's proto messages, built from plans, sessions and subscriptions. */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { PLAN_IDS, type PlanId } from '@relayplane/contract/contract';
import type { CheckoutSessionSchema, PlanSchema, SubscriptionSchema } from '@relayplane/proto/billing';
import type { CheckoutSession } from '../domain/checkout.ts';
import type { Plan } from '../domain/plans.ts';
import type { Subscription } from '../stores/subscriptions.ts';

export function planMessage(plan: Plan): MessageInitShape<typeof PlanSchema> {
  return {
    id: plan.id,
    name: plan.name,
    limits: {
      maxConcurrentConnections: plan.limits.maxConcurrentConnections,
      maxApiKeys: plan.limits.maxApiKeys,
      maxProjects: plan.limits.maxProjects,
      maxBots: plan.limits.maxBots,
      maxAllowlistEntries: plan.limits.maxAllowlistEntries,
      maxCredentialTtlSeconds: plan.limits.maxCredentialTtlSeconds,
      maxIssuancePerSecondPerKey: plan.limits.maxIssuancePerSecondPerKey,
      maxWebhookEndpoints: plan.limits.maxWebhookEndpoints,
    },
    price: {
      currency: plan.price.currency,
      monthlyAmountMinor: plan.price.monthlyAmountMinor,
      contactSales: plan.price.contactSales,
    },
  };
}

/** Every plan, in catalogue order. */
export function catalogueMessage(plans: Record<PlanId, Plan>): MessageInitShape<typeof PlanSchema>[] {
  return PLAN_IDS.map((id) => planMessage(plans[id]));
}

export function checkoutMessage(session: CheckoutSession): MessageInitShape<typeof CheckoutSessionSchema> {
  return {
    id: session.id,
    tenantId: session.tenantId,
    planId: session.planId,
    provider: session.provider,
    status: session.status,
    url: session.url,
    createdAt: timestampFromDate(session.createdAt),
    expiresAt: timestampFromDate(session.expiresAt),
  };
}

export function subscriptionMessage(subscription: Subscription): MessageInitShape<typeof SubscriptionSchema> {
  return {
    tenantId: subscription.tenantId,
    planId: subscription.planId,
    updatedAt: timestampFromDate(subscription.updatedAt),
  };
}
