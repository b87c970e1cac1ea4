import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { BillingService, CheckoutSessionSchema, PlanSchema } from '@relayplane/proto/billing';
import { AppError } from '@relayplane/shared/errors';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { type Checkout, DEFAULT_PLAN, requirePlanId, requireTenantId } from '../checkout.ts';
import { entitlementsOf } from '../domain/entitlements.ts';
import { isPlanId, PLAN_IDS, type Plan, type PlanId } from '../domain/plans.ts';
import type { PlanChanges } from '../plan-changes.ts';
import type { CheckoutSession } from '../stores/checkout-sessions.ts';
import type { SubscriptionStore } from '../stores/subscriptions.ts';
import type { StripeWebhooks } from '../stripe-webhooks.ts';
import type { Usage } from '../usage/usage.ts';

export { DEFAULT_PLAN };

function planMessage(plan: Plan): MessageInitShape<typeof PlanSchema> {
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
    },
    price: {
      currency: plan.price.currency,
      monthlyAmountMinor: plan.price.monthlyAmountMinor,
      contactSales: plan.price.contactSales,
    },
  };
}

function checkoutMessage(session: CheckoutSession): MessageInitShape<typeof CheckoutSessionSchema> {
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

export function billingHandlers(deps: {
  plans: Record<PlanId, Plan>;
  subscriptions: SubscriptionStore;
  planChanges: PlanChanges;
  checkout: Checkout;
  /** Undefined unless the Stripe provider is configured. */
  stripeWebhooks: StripeWebhooks | undefined;
  usage: Usage;
}): ServiceImpl<typeof BillingService> {
  const { plans, subscriptions, planChanges, checkout, stripeWebhooks, usage } = deps;
  const catalogue = PLAN_IDS.map((id) => planMessage(plans[id]));

  async function planOf(tenantId: string): Promise<PlanId> {
    const sub = await subscriptions.get(tenantId);
    return sub && isPlanId(sub.planId) ? sub.planId : DEFAULT_PLAN;
  }

  return {
    async listPlans() {
      return { plans: catalogue };
    },
    async getPricing() {
      return { entries: catalogue.map((p) => ({ planId: p.id, price: p.price })) };
    },
    async getSubscription(req) {
      requireTenantId(req.tenantId);
      const sub = await subscriptions.get(req.tenantId);
      const planId = sub && isPlanId(sub.planId) ? sub.planId : DEFAULT_PLAN;
      return {
        subscription: {
          tenantId: req.tenantId,
          planId,
          updatedAt: sub ? timestampFromDate(sub.updatedAt) : undefined,
        },
        plan: planMessage(plans[planId]),
      };
    },
    async setPlan(req) {
      requireTenantId(req.tenantId);
      const planId = requirePlanId(req.planId);
      const sub = await planChanges.set(req.tenantId, planId);
      return {
        subscription: {
          tenantId: sub.tenantId,
          planId: sub.planId,
          updatedAt: timestampFromDate(sub.updatedAt),
        },
      };
    },
    async getEntitlements(req) {
      requireTenantId(req.tenantId);
      return entitlementsOf(plans[await planOf(req.tenantId)]);
    },
    async createCheckoutSession(req) {
      const { session, replayed } = await checkout.create({
        tenantId: req.tenantId,
        planId: req.planId,
        idempotencyKey: req.idempotencyKey,
        publicBaseUrl: req.publicBaseUrl,
      });
      return { session: checkoutMessage(session), replayed };
    },
    async getCheckoutSession(req) {
      return { session: checkoutMessage(await checkout.get(req.id)) };
    },
    async completeCheckoutSession(req) {
      const { session, subscription } = await checkout.complete(req.id);
      return {
        session: checkoutMessage(session),
        subscription: {
          tenantId: subscription.tenantId,
          planId: subscription.planId,
          updatedAt: timestampFromDate(subscription.updatedAt),
        },
      };
    },
    async handleWebhook(req) {
      if (req.provider !== 'stripe') {
        throw new AppError('invalid_request', `unknown billing provider "${req.provider}"`);
      }
      if (!stripeWebhooks) {
        throw new AppError(
          'invalid_request',
          'stripe webhooks are not accepted: the billing provider is not stripe',
        );
      }
      const { eventId } = await stripeWebhooks.handle(req.payload, req.signature);
      return { eventId, duplicate: false };
    },
    async getUsage(req) {
      // Usage validates the tenant id and the day range.
      const days = await usage.query(req.tenantId, req.from, req.to);
      return { days };
    },
  };
}
