import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { SLOTS_UNAVAILABLE_MESSAGE } from '../issuance/issuance.ts';
import type { IssuerDeps } from './deps.ts';

/**
 * GetTenantConnections: the tenant's relay sessions with no end recorded (the ledger) and the
 * slots it holds (the slot store: live sessions and credentials within their connect window, the
 * count the cap is decided against). The cap is billing's; the gateway adds it.
 */
export function getTenantConnections({
  sessionStore,
  slots,
}: Pick<IssuerDeps, 'sessionStore' | 'slots'>): ServiceImpl<typeof IssuerService>['getTenantConnections'] {
  return async (req) => {
    if (!isId('tenant', req.tenantId)) throw new AppError('invalid_request', 'tenant_id must be a tenant id');
    const [liveSessions, slotsHeld] = await Promise.all([
      sessionStore.unendedCountOf(req.tenantId),
      // As issuance does: the slot store away (Redis) is a retryable refusal, never a guess.
      slots.held(req.tenantId).catch((err: unknown) => {
        throw new AppError('unavailable', SLOTS_UNAVAILABLE_MESSAGE, { retryAfterSeconds: 1, cause: err });
      }),
    ]);
    return { liveSessions, slotsHeld };
  };
}
