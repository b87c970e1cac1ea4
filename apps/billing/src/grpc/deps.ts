import type { PlanId } from '@relayplane/contract/contract';
import type { AuditEventInput, AuditRecorder } from '@relayplane/shared/audit-outbox';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { RateLimiter } from '@relayplane/shared/rate-limit';
import type { CheckoutConfig } from '../config.ts';
import type { Plan } from '../domain/plans.ts';
import type { BillingProvider } from '../providers/provider.ts';
import type { StripeWebhooks } from '../providers/stripe-webhooks.ts';
import type { CheckoutSessionStore } from '../stores/checkout-sessions.ts';
import type { PlanChanges } from '../stores/plan-changes.ts';
import type { SubscriptionStore } from '../stores/subscriptions.ts';
import type { UsageStore } from '../stores/usage-daily.ts';

/** What the billing RPC handlers work with; each handler takes only the part it uses. */
export interface BillingDeps {
  plans: Record<PlanId, Plan>;
  subscriptions: SubscriptionStore;
  planChanges: PlanChanges;
  checkoutSessions: CheckoutSessionStore;
  provider: BillingProvider;
  /**
   * Whether a built-in checkout of a paid plan may be created and completed: the built-in
   * provider with `BILLING_BUILTIN_PAID_CHECKOUT` on. False with Stripe (a built-in session left
   * from before a switch to Stripe is not completed for a paid plan either).
   */
  builtinPaidCheckout: boolean;
  /** Checkout sessions created per tenant (fixed window). */
  checkoutThrottle: RateLimiter;
  checkout: CheckoutConfig;
  /** Undefined unless the Stripe provider is configured. */
  stripeWebhooks: StripeWebhooks | undefined;
  usage: UsageStore;
  clock: Clock;
  logger: Logger;
  /** The audit outbox (checkout.create; plan changes record theirs through planChanges). */
  audit: AuditRecorder;
  /** Records an outcome that changes nothing (a refusal) in a transaction of its own, then kicks. */
  recordAlone(event: AuditEventInput): Promise<void>;
}
