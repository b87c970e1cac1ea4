import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { BillingService, PlanSchema } from '@relayplane/proto/billing';
import type { Clock } from '@relayplane/shared/clock';
import { AppError } from '@relayplane/shared/errors';
import { isId } from '@relayplane/shared/ids';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { isPlanId, PLAN_IDS, type Plan, type PlanId } from '../domain/plans.ts';
import type { SubscriptionStore } from '../stores/subscriptions.ts';

/** Tenants without a subscription row are on this plan. */
export const DEFAULT_PLAN: PlanId = 'free';

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

function requireTenantId(tenantId: string): void {
  if (!isId('tenant', tenantId)) throw new AppError('invalid_request', 'tenant_id is not a tenant id');
}

export function billingHandlers(deps: {
  plans: Record<PlanId, Plan>;
  subscriptions: SubscriptionStore;
  clock: Clock;
}): ServiceImpl<typeof BillingService> {
  const { plans, subscriptions, clock } = deps;
  const catalogue = PLAN_IDS.map((id) => planMessage(plans[id]));
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
      if (!isPlanId(req.planId)) {
        throw new AppError('invalid_request', `unknown plan "${req.planId}" (known: ${PLAN_IDS.join(', ')})`);
      }
      const sub = await subscriptions.setPlan(req.tenantId, req.planId, clock.now());
      return {
        subscription: {
          tenantId: sub.tenantId,
          planId: sub.planId,
          updatedAt: timestampFromDate(sub.updatedAt),
        },
      };
    },
  };
}
