import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { relayMessage } from './messages.ts';

/**
 * ListRelays: static relays, then registered ones (oldest first), each with its health now;
 * `limit` per page (1..200, 0: 50), `cursor` the previous page's `next_cursor`.
 */
export function listRelays({
  relays,
}: Pick<IssuerDeps, 'relays'>): ServiceImpl<typeof IssuerService>['listRelays'] {
  return async (req) => {
    const page = await relays.page({ limit: req.limit, cursor: req.cursor });
    return { relays: page.relays.map(relayMessage), nextCursor: page.nextCursor };
  };
}
