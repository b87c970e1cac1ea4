import type { BillingService } from '@relayplane/proto/billing';
import { AppError } from '@relayplane/shared/errors';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { BillingDeps } from './deps.ts';

/** HandleWebhook: a provider's signed event, applied once per event id. */
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
    const { eventId } = await stripeWebhooks.handle(req.payload, req.signature);
    return { eventId, duplicate: false };
  };
}
