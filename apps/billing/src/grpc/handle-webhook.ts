import { AppError } from '@relayplane/contract/errors';
import type { BillingService } from '@relayplane/proto/billing';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { BillingDeps } from './deps.ts';

/**
 * HandleWebhook: a provider's signed event, applied once per event id; a replay answers
 * `duplicate` (not an error: Stripe retries anything but a 2xx for days).
 */
export function handleWebhook({
  stripeWebhooks,
}: Pick<BillingDeps, 'stripeWebhooks'>): ServiceImpl<typeof BillingService>['handleWebhook'] {
  return async (req) => {
    if (req.provider !== 'stripe') {
      throw new AppError('invalid_request', `unknown billing provider "${req.provider}"`);
    }
    if (!stripeWebhooks) {
      throw new AppError(
        'invalid_request',
        'stripe webhooks are not accepted: the billing provider is not stripe',
      );
    }
    return stripeWebhooks.handle(req.payload, req.signature);
  };
}
