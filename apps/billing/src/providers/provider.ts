import type { Plan } from '../domain/plans.ts';

export interface CheckoutRequest {
  /** Our checkout session id (`cks_…`). */
  sessionId: string;
  tenantId: string;
  plan: Plan;
  /** Where the gateway serves pages (the built-in checkout page, Stripe's return pages). */
  publicBaseUrl: string;
  expiresAt: Date;
}

export interface ProviderCheckout {
  /** Where the user completes the change. */
  url: string;
  /** The provider's id for the session; null when the provider keeps none. */
  reference: string | null;
}

/** A billing provider: where a plan change is paid for and confirmed. */
export interface BillingProvider {
  readonly name: 'builtin' | 'stripe';
  /** Undefined when the plan can be checked out; otherwise why not (an invalid_request message). */
  refuses(plan: Plan): string | undefined;
  createCheckout(request: CheckoutRequest): Promise<ProviderCheckout>;
}

/** Self-hosting: the checkout page is the gateway's, and confirming it completes the session. */
export class BuiltinProvider implements BillingProvider {
  readonly name = 'builtin';

  refuses(): string | undefined {
    return undefined;
  }

  async createCheckout(request: CheckoutRequest): Promise<ProviderCheckout> {
    return { url: checkoutPageUrl(request.publicBaseUrl, request.sessionId), reference: null };
  }
}

/** The gateway's page for one checkout session. */
export function checkoutPageUrl(publicBaseUrl: string, sessionId: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/billing/checkout/${sessionId}`;
}
