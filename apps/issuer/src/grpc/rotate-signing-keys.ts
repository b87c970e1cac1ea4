import { AppError } from '@relayplane/contract/errors';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';
import { signingKeysMessage } from './messages.ts';

const MAX_REQUESTED_BY = 200;

/**
 * RotateSigningKeys: records an on-demand rotation and runs a maintenance tick at once; the
 * rotation takes effect then, or once the next key is eligible (`rotation_pending_since`).
 */
export function rotateSigningKeys({
  keys,
}: Pick<IssuerDeps, 'keys'>): ServiceImpl<typeof IssuerService>['rotateSigningKeys'] {
  return async (req) => {
    const requestedBy = req.requestedBy.trim();
    if (requestedBy.length > MAX_REQUESTED_BY) {
      throw new AppError('invalid_request', `requested_by must be at most ${MAX_REQUESTED_BY} characters`);
    }
    const result = await keys.rotate(requestedBy || 'unspecified');
    // The listing's first page, as ListSigningKeys without a cursor answers it.
    const page = await keys.page({ limit: 0, cursor: '' });
    return { ...signingKeysMessage(page), nextCursor: page.nextCursor, rotated: result.rotation !== null };
  };
}
