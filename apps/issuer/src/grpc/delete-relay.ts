import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';

/** DeleteRelay: a registered relay leaves assignment and its token stops working. */
export function deleteRelay({
  relays,
}: Pick<IssuerDeps, 'relays'>): ServiceImpl<typeof IssuerService>['deleteRelay'] {
  return async (req) => {
    await relays.remove(req.relayId);
    return {};
  };
}
