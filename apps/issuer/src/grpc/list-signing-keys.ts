import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { signingKeysMessage } from './messages.ts';

/**
 * ListSigningKeys: every key, removed ones too, and the pending rotation request; `limit` per
 * page (1..200, 0: 50), `cursor` the previous page's `next_cursor`.
 */
export function listSigningKeys({
  keys,
}: Pick<IssuerDeps, 'keys'>): ServiceImpl<typeof IssuerService>['listSigningKeys'] {
  return async (req) => {
    const page = await keys.page({ limit: req.limit, cursor: req.cursor });
    return { ...signingKeysMessage(page), nextCursor: page.nextCursor };
  };
}
