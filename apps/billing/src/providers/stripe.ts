import Stripe from 'stripe';
import type { ProviderConfig } from '../config.ts';
import type { Plan } from '../domain/plans.ts';
import {
  type BillingProvider,
  type CheckoutRequest,
  checkoutPageUrl,
  type ProviderCheckout,
} from './provider.ts';

type StripeConfig = Extract<ProviderConfig, { kind: 'stripe' }>;

/** The official SDK, pointed at api.stripe.com or at `STRIPE_API_BASE`. */
export function createStripeClient(config: StripeConfig): Stripe {
  return new Stripe(config.secretKey, {
    maxNetworkRetries: 1,
    timeout: 10_000,
    telemetry: false,
    ...(config.apiBase
      ? { host: config.apiBase.host, port: config.apiBase.port, protocol: config.apiBase.protocol }
      : {}),
  });
}

/** Stripe Checkout in subscription mode: one line item, the plan's configured price. */
export class StripeProvider implements BillingProvider {
  readonly name = 'stripe';
  readonly #stripe: Stripe;

  constructor(stripe: Stripe) {
    this.#stripe = stripe;
  }

  refuses(plan: Plan): string | undefined {
    if (plan.stripePriceId !== undefined) return undefined;
    return `the ${plan.id} plan is not sold through checkout (no stripe_price_id is configured for it)`;
  }

  async createCheckout(request: CheckoutRequest): Promise<ProviderCheckout> {
    const price = request.plan.stripePriceId;
    if (price === undefined) throw new Error(`plan ${request.plan.id} has no stripe_price_id`);
    const metadata = {
      tenant_id: request.tenantId,
      plan_id: request.plan.id,
      checkout_session_id: request.sessionId,
    };
    const page = checkoutPageUrl(request.publicBaseUrl, request.sessionId);
    const session = await this.#stripe.checkout.sessions.create(
      {
        mode: 'subscription',
        line_items: [{ price, quantity: 1 }],
        client_reference_id: request.tenantId,
        metadata,
        // Copied onto the subscription, so its later events name the tenant too.
        subscription_data: { metadata: { tenant_id: request.tenantId, plan_id: request.plan.id } },
        success_url: `${page}?result=success`,
        cancel_url: `${page}?result=cancel`,
        expires_at: Math.floor(request.expiresAt.getTime() / 1000),
      },
      // Our session id: an SDK retry never creates a second Stripe session.
      { idempotencyKey: request.sessionId },
    );
    if (!session.url) throw new Error('stripe answered a checkout session without a url');
    return { url: session.url, reference: session.id };
  }
}
