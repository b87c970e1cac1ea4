import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import { CHECKOUT_NOT_FOUND_MESSAGE, type CheckoutSession, sessionView } from '../domain/checkout.ts';
import type { BillingDeps } from './deps.ts';

/** A checkout session as callers see it; not found while its provider call is in flight. */
export async function findCheckoutSession(
  { checkoutSessions, clock }: Pick<BillingDeps, 'checkoutSessions' | 'clock'>,
  id: string,
): Promise<CheckoutSession> {
  const session = isId('checkoutSession', id) ? await checkoutSessions.get(id) : undefined;
  if (!session || session.url === '') throw new AppError('not_found', CHECKOUT_NOT_FOUND_MESSAGE);
  return sessionView(session, clock.now());
}
